package boxexec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serve starts a host in a fresh directory and an exec server (this
// process's goroutine, commands its children) connected to it.
func serve(t *testing.T) (*Host, chan error) {
	t.Helper()
	h, err := Listen(filepath.Join(t.TempDir(), "exec.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	done := make(chan error, 1)
	go func() { done <- Serve(h.path) }()
	if !h.WaitConnected(30 * time.Second) {
		t.Fatal("the exec server did not connect")
	}
	return h, done
}

// pipes are a command's three pipes: its ends, and ours.
func pipes(t *testing.T) (child [3]*os.File, stdin *os.File, stdout, stderr *os.File) {
	t.Helper()
	var ours [3]*os.File
	for i := range child {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			child[i], ours[i] = r, w
		} else {
			child[i], ours[i] = w, r
		}
	}
	return child, ours[0], ours[1], ours[2]
}

func start(t *testing.T, h *Host, req *Request) (*Cmd, *os.File, *os.File, *os.File, error) {
	child, in, out, errf := pipes(t)
	c, err := h.Start(req, child[0], child[1], child[2])
	for _, f := range child {
		f.Close()
	}
	return c, in, out, errf, err
}

// A command's bytes pass through the pipes both ways, byte-exact, stdin's
// EOF reaches it, the environment is laid over the server's, and its exit
// code comes back.
func TestExecPipes(t *testing.T) {
	h, _ := serve(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	c, in, out, errf, err := start(t, h, &Request{Path: "/bin/sh", Args: []string{"sh", "-c", `cat; echo "$BOXEXEC_X" >&2; exit 3`},
		Env: []string{"BOXEXEC_X=one", "BOXEXEC_X=two"}, Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Pid() <= 0 {
		t.Errorf("pid %d", c.Pid())
	}
	go func() { in.Write(data); in.Close() }()
	errc := make(chan []byte)
	go func() { b, _ := io.ReadAll(errf); errc <- b }()
	got, _ := io.ReadAll(out)
	if !bytes.Equal(got, data) {
		t.Errorf("stdout: %d bytes, want %d", len(got), len(data))
	}
	if e := <-errc; string(e) != "two\n" {
		t.Errorf("stderr %q, want two", e)
	}
	if ex := c.Wait(); ex.Code != 3 || ex.Signal != 0 || ex.Err != nil {
		t.Errorf("exit %v, want exit 3", ex)
	}
}

// A signal reaches the command's process group; a missing working
// directory is ENOENT.
func TestExecSignalAndStartError(t *testing.T) {
	h, _ := serve(t)
	c, _, out, _, err := start(t, h, &Request{Path: "/bin/sh", Args: []string{"sh", "-c", "echo ready; sleep 100 & wait"}})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	io.ReadFull(out, b)
	c.Signal(syscall.SIGTERM)
	if ex := c.Wait(); ex.Signal != syscall.SIGTERM {
		t.Errorf("exit %v, want signal TERM", ex)
	}
	// The group's sleep got it too: the pipe's last writer is gone.
	io.ReadAll(out)

	_, _, _, _, err = start(t, h, &Request{Path: "/bin/sh", Args: []string{"sh"}, Dir: "/no/such/dir"})
	if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("start in a missing directory: %v, want ENOENT", err)
	}
}

// A server that goes away ends its commands' waits with an error, and
// the next Start says ErrNoServer: nothing ran.
func TestExecServerGone(t *testing.T) {
	h, _ := serve(t)
	c, _, _, _, err := start(t, h, &Request{Path: "/bin/sleep", Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(c.Pid(), syscall.SIGKILL)
	h.Drop()
	if ex := c.Wait(); ex.Err == nil || !strings.Contains(ex.Err.Error(), "went away") {
		t.Errorf("exit %v, want the server gone", ex)
	}
	for h.Connected() {
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, _, _, err := start(t, h, &Request{Path: "/bin/true", Args: []string{"true"}}); !errors.Is(err, ErrNoServer) {
		t.Errorf("start with no server: %v, want ErrNoServer", err)
	}
}

// Once the command exited, its output ends with the pipe's last bytes, as
// the engine's exec API ends an exec's: a background process holding the
// pipe (here still alive after) does not keep the reader waiting.
func TestExecOutputEndsAtExit(t *testing.T) {
	h, _ := serve(t)
	big := strings.Repeat("x", 40000)
	c, _, out, _, err := start(t, h, &Request{Path: "/bin/sh", Args: []string{"sh", "-c", "sleep 60 & echo $!; printf " + big}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c.Output(out))
	if err != nil {
		t.Fatal(err)
	}
	pid, rest, _ := strings.Cut(string(got), "\n")
	if rest != big {
		t.Errorf("read %d bytes after the pid, want %d", len(rest), len(big))
	}
	var n int
	if _, err := fmt.Sscan(pid, &n); err != nil || syscall.Kill(n, 0) != nil {
		t.Errorf("the background holder %q is not alive: %v", pid, err)
	}
	syscall.Kill(n, syscall.SIGKILL)
	if ex := c.Wait(); ex.Code != 0 {
		t.Errorf("exit %v", ex)
	}
}

// A box that opens connections and says nothing costs the host at most
// maxConns of them; the server that says hello after they are gone is
// served.
func TestExecConnsBounded(t *testing.T) {
	h, err := Listen(filepath.Join(t.TempDir(), "exec.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	addr := &net.UnixAddr{Name: h.path, Net: "unixpacket"}
	var silent []*net.UnixConn
	for range maxConns + 3 {
		c, err := net.DialUnix("unixpacket", nil, addr)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	// The ones past maxConns are closed by the host: a read ends.
	closed := 0
	for _, c := range silent[maxConns:] {
		if n, _ := c.Read(make([]byte, 1)); n == 0 {
			closed++
		}
	}
	if closed != 3 {
		t.Errorf("%d of the connections past %d closed, want 3", closed, maxConns)
	}
	for _, c := range silent {
		c.Close()
	}
	for {
		h.mu.Lock()
		n := h.conns
		h.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	go Serve(h.path)
	if !h.WaitConnected(30 * time.Second) {
		t.Fatal("the server after them did not connect")
	}
}

// A command with a TTY runs on a terminal the server opens: of the size
// asked, with the client's modes, named in SSH_TTY, the terminfo entry
// installed; a resize reaches it as SIGWINCH, what it types and writes
// passes the two pipes, and what it wrote just before its exit arrives
// before the exit code.
func TestExecTerminal(t *testing.T) {
	h, _ := serve(t)
	home := t.TempDir()
	child, in, out, errf := pipes(t)
	errf.Close()
	child[2].Close()
	script := `tty; stty size; stty -a | grep -o -- -echo; echo "tty=$SSH_TTY"
trap 'stty size; echo last; exit 5' WINCH
read -r line; echo "got $line"
while :; do sleep 0.05; done`
	// ECHO (53) off, then TTY_OP_END.
	modes := []byte{53, 0, 0, 0, 0, 0}
	c, err := h.Start(&Request{Path: "/bin/bash", Args: []string{"bash", "-c", script}, Env: []string{"HOME=" + home},
		TTY: &TTY{Rows: 33, Cols: 91, Modes: modes, Term: "xterm-boxexec", Terminfo: []byte("entry")}}, child[0], child[1], nil)
	child[0].Close()
	child[1].Close()
	if err != nil {
		t.Fatal(err)
	}
	outc := make(chan string, 1)
	lines := make(chan string, 100)
	go func() {
		var all strings.Builder
		buf := make([]byte, 4096)
		r := c.Output(out)
		for {
			n, err := r.Read(buf)
			all.Write(buf[:n])
			if strings.Contains(all.String(), "got ") {
				select {
				case lines <- all.String():
				default:
				}
			}
			if err != nil {
				outc <- all.String()
				return
			}
		}
	}()
	in.Write([]byte("hello\r"))
	<-lines
	c.Resize(40, 100)
	if ex := c.Wait(); ex.Code != 5 || ex.Err != nil {
		t.Errorf("exit %v, want exit 5", ex)
	}
	got := <-outc
	for _, want := range []string{"/dev/pts/", "33 91", "-echo", "tty=/dev/pts/", "got hello", "40 100", "last"} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "hello\r\nhello") || strings.Count(got, "hello") != 1 {
		t.Errorf("output %q: the input was echoed with ECHO off", got)
	}
	for _, sub := range []string{"x", "78"} {
		if b, err := os.ReadFile(filepath.Join(home, ".terminfo", sub, "xterm-boxexec")); string(b) != "entry" {
			t.Errorf("terminfo entry in %s: %q, %v", sub, b, err)
		}
	}
}
