//go:build unix

package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/unixsock"
)

// boxListener runs ServeListener as `cocoonbox-agent listen` would, on
// pipes; it returns the "listening" Event, a reader of the later ones, the
// stdin to write Close lines to (closing it ends the listener), and the
// channel ServeListener's result comes on.
func boxListener(t *testing.T, spec ListenSpec) (Event, *bufio.Reader, *io.PipeWriter, chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := ServeListener(context.Background(), spec, inR, outW)
		outW.CloseWithError(err)
		done <- err
	}()
	t.Cleanup(func() { inW.Close() })
	br := bufio.NewReader(outR)
	ev, err := readEvent(br)
	if err != nil {
		t.Fatalf("listen %s: %v", spec, err)
	}
	if ev.Event != "listening" || ev.Control == "" {
		t.Fatalf("listen %s: first event %+v", spec, ev)
	}
	return ev, br, inW, done
}

// boxTake runs Take for connection id on pipes, as `cocoonbox-agent take`
// would: what the test writes to the returned writer goes to the
// connection, what the connection sends comes out of the reader, after the
// Ready byte.
func boxTake(control string, id uint64) (io.WriteCloser, *bufio.Reader, chan error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Take(control, id, inR, outW, nil)
		outW.CloseWithError(err)
		done <- err
	}()
	return inW, bufio.NewReader(outR), done
}

func TestListenerTCP(t *testing.T) {
	ev, br, stdin, done := boxListener(t, ListenSpec{Mode: ListenTCP, Host: "localhost", Port: 0})
	if ev.Port == 0 {
		t.Fatalf("listening on port 0: %+v", ev)
	}
	dir := filepath.Dir(ev.Control)
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("control directory %s: %v %v; want a 0700 directory", dir, fi, err)
	}
	client, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(int(ev.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	acc, err := readEvent(br)
	if err != nil || acc.Event != "accept" || acc.ID != 1 || acc.Host != "127.0.0.1" || acc.Port != uint32(client.LocalAddr().(*net.TCPAddr).Port) {
		t.Fatalf("after a connect: %+v, %v; want accept 1 from the client's address", acc, err)
	}

	// Taken: bytes both ways; the laptop's half-close is passed on, and
	// the box's client's close ends the take (an Exec's stdout has no EOF
	// but its end, as with relay).
	w, r, took := boxTake(ev.Control, acc.ID)
	if b, err := r.ReadByte(); err != nil || b != Ready {
		t.Fatalf("take: %q, %v; want the ready byte", b, err)
	}
	client.Write([]byte("from the box's client"))
	if got, err := io.ReadAll(io.LimitReader(r, int64(len("from the box's client")))); string(got) != "from the box's client" {
		t.Fatalf("through take: %q, %v", got, err)
	}
	w.Write([]byte("answer"))
	w.Close()
	if got, err := io.ReadAll(client); string(got) != "answer" || err != nil {
		t.Errorf("the box's client read %q, %v; want the answer and EOF", got, err)
	}
	client.Close()
	if rest, err := io.ReadAll(r); len(rest) != 0 || err != nil {
		t.Errorf("after the box's client closed, take gave %q, %v; want EOF", rest, err)
	}
	if err := <-took; err != nil {
		t.Errorf("take: %v", err)
	}

	// Taken twice: gone.
	_, _, again := boxTake(ev.Control, acc.ID)
	if err := <-again; !errors.Is(err, errGone) {
		t.Errorf("take of a taken connection: %v; want it gone", err)
	}

	// Rejected: closed in the box, and gone for take.
	c2, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(int(ev.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	acc2, err := readEvent(br)
	if err != nil || acc2.ID != 2 {
		t.Fatalf("second accept: %+v, %v", acc2, err)
	}
	b, _ := json.Marshal(Close{Close: acc2.ID})
	stdin.Write(append(b, '\n'))
	if n, err := c2.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("a rejected connection read %d, %v; want it closed", n, err)
	}

	// EOF on stdin ends the listener: the port and the directory are gone.
	stdin.Close()
	if err := <-done; err != nil {
		t.Errorf("listener: %v", err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("after the end, the directory: %v; want it removed", err)
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(int(ev.Port))); err == nil {
		c.Close()
		t.Errorf("after the end, port %d still accepts", ev.Port)
	}
}

func TestListenerInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint32(l.Addr().(*net.TCPAddr).Port)
	var out strings.Builder
	err = ServeListener(context.Background(), ListenSpec{Mode: ListenTCP, Host: "127.0.0.1", Port: port}, strings.NewReader(""), &out)
	if _, ok := err.(*ListenError); !ok || !errors.Is(err, syscall.EADDRINUSE) || out.Len() != 0 {
		t.Errorf("a port in use: %v (%T), output %q; want a *ListenError for EADDRINUSE and nothing written", err, err, out.String())
	}
	if err != nil && err.Error() != "listen 127.0.0.1:"+strconv.Itoa(int(port))+": address already in use" {
		t.Errorf("message %q", err)
	}
}

func TestListenerUnix(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "fwd.sock")
	// A stale socket (its listener gone without removing it) is replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ev, br, stdin, done := boxListener(t, ListenSpec{Mode: ListenUnix, Path: sock})
	if ev.Path != sock {
		t.Errorf("listening on %q, want %q", ev.Path, sock)
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v, %v; want a 0600 socket", fi, err)
	}
	// A second listener on the live socket: in use. Its probe (a connect,
	// to tell a live socket from a stale one) is the first one's first
	// connection.
	err = ServeListener(context.Background(), ListenSpec{Mode: ListenUnix, Path: sock}, strings.NewReader(""), io.Discard)
	if _, ok := err.(*ListenError); !ok || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("a second listener on a live socket: %v; want a *ListenError for EADDRINUSE", err)
	}
	if probe, err := readEvent(br); err != nil || probe.ID != 1 {
		t.Fatalf("the probe's accept: %+v, %v", probe, err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acc, err := readEvent(br)
	if err != nil || acc.Event != "accept" || acc.Host != "" || acc.Port != 0 {
		t.Fatalf("accept: %+v, %v; want one with no address", acc, err)
	}
	w, r, took := boxTake(ev.Control, acc.ID)
	if b, err := r.ReadByte(); err != nil || b != Ready {
		t.Fatalf("take: %q, %v; want the ready byte", b, err)
	}
	c.Write([]byte("ping"))
	c.(*net.UnixConn).CloseWrite()
	if got, _ := io.ReadAll(r); string(got) != "ping" {
		t.Errorf("through take: %q", got)
	}
	w.Close()
	if err := <-took; err != nil {
		t.Errorf("take: %v", err)
	}
	stdin.Close()
	<-done
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("after the end, the socket: %v; want it removed", err)
	}
}

func TestListenerAgent(t *testing.T) {
	ev, _, stdin, done := boxListener(t, ListenSpec{Mode: ListenAgent})
	dir := filepath.Dir(ev.Path)
	if filepath.Dir(dir) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(dir), privateDirPrefix) || filepath.Base(ev.Path) != "agent."+strconv.Itoa(os.Getpid()) {
		t.Errorf("agent socket %q: want TMPDIR/%sPID-RANDOM/agent.PID", ev.Path, privateDirPrefix)
	}
	for p, want := range map[string]os.FileMode{dir: os.ModeDir | 0o700, ev.Path: os.ModeSocket | 0o600} {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode() != want || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Getuid() {
			t.Errorf("%s: %v, %v; want %v, ours", p, fi.Mode(), err, want)
		}
	}
	stdin.Close()
	<-done
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("after the end, the agent socket's directory: %v; want it removed", err)
	}
}

// TestPrivateDirSymlink: a link planted where the private directory would
// go is not followed: the directory is made at another name, and nothing
// appears where the link points.
func TestPrivateDirSymlink(t *testing.T) {
	base, target := t.TempDir(), t.TempDir()
	names := []string{"1-planted", "1-fresh"}
	old := tempName
	t.Cleanup(func() { tempName = old })
	tempName = func() string {
		n := names[0]
		names = names[1:]
		return n
	}
	planted := filepath.Join(base, privateDirPrefix+"1-planted")
	if err := os.Symlink(target, planted); err != nil {
		t.Fatal(err)
	}
	dir, err := privateDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(base, privateDirPrefix+"1-fresh") {
		t.Errorf("made %s, want the next name", dir)
	}
	if fi, err := os.Lstat(planted); err != nil || fi.Mode().Type() != os.ModeSymlink {
		t.Errorf("the planted link: %v, %v; want it left as it is", fi, err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("the link's target holds %d entries, want none", len(ents))
	}
}

// TestPrivateDirStale: the directory a listener killed with SIGKILL left
// is removed by the next listener; a live one's is kept.
func TestPrivateDirStale(t *testing.T) {
	base := t.TempDir()
	dead := filepath.Join(base, privateDirPrefix+"999999999-abc")
	live := filepath.Join(base, privateDirPrefix+strconv.Itoa(os.Getpid())+"-abc")
	for _, d := range []string{dead, live} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "agent.1"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := privateDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("a dead listener's directory: %v; want it removed", err)
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("a live listener's directory: %v; want it kept", err)
	}
	os.RemoveAll(dir)
}

// A TMPDIR deeper than a socket's address leaves room for (a box user's,
// or the one a client sends) puts the agent's socket and the control
// socket in /tmp instead: both bind, a client dials the agent's socket by
// the path the Event names, and take gets the connection.
func TestListenerDeepTMPDIR(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("deep-directory/", 12))
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", deep)
	ev, br, stdin, done := boxListener(t, ListenSpec{Mode: ListenAgent})
	for _, p := range []string{ev.Path, ev.Control} {
		if len(p) > unixsock.Max || !strings.HasPrefix(p, "/tmp/"+privateDirPrefix) {
			t.Errorf("socket %s (%d bytes): want one in /tmp within %d bytes", p, len(p), unixsock.Max)
		}
	}
	client, err := net.Dial("unix", ev.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	acc, err := readEvent(br)
	if err != nil || acc.Event != "accept" {
		t.Fatalf("after a connect: %+v, %v", acc, err)
	}
	w, r, took := boxTake(ev.Control, acc.ID)
	if b, err := r.ReadByte(); err != nil || b != Ready {
		t.Fatalf("take: %q, %v; want the ready byte", b, err)
	}
	client.Write([]byte("ping"))
	client.(*net.UnixConn).CloseWrite()
	if got, _ := io.ReadAll(r); string(got) != "ping" {
		t.Errorf("through take: %q", got)
	}
	w.Close()
	<-took
	stdin.Close()
	<-done
}
