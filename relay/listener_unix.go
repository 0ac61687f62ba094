//go:build unix

package relay

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/unixsock"
)

// maxPending bounds the connections a listener holds that were accepted
// and not yet taken or closed; one more is closed at once.
const maxPending = 256

// ListenError is a listener that could not listen: the address is in use
// or not the box's, the socket path is taken. The agent exits ExitListen
// with its message as the one stderr line.
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string { return "listen " + e.Addr + ": " + reason(e.Err) }
func (e *ListenError) Unwrap() error { return e.Err }

// ServeListener is the box half of a listener, `cocoonbox-agent listen`:
// it listens as spec says, writes a "listening" Event on out, then one
// "accept" Event per connection, and hands each to the `cocoonbox-agent
// take` that asks for it on the control socket (the descriptor passed
// with SCM_RIGHTS). It reads Close lines from in; in's EOF, or ctx's end
// (a signal), ends it. Whatever it made is removed then: the unix socket
// it listened on, the control socket and their private directory (0700,
// in os.TempDir, or /tmp when that is too deep: socketBase); connections
// not yet taken are closed, taken ones are the takers'. A failure to
// listen is a *ListenError and nothing is written.
func ServeListener(ctx context.Context, spec ListenSpec, in io.Reader, out io.Writer) error {
	if err := spec.Check(); err != nil {
		return err
	}
	dir, err := privateDir(socketBase())
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer os.RemoveAll(dir)
	control, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "control"), Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer control.Close()
	ls, ev, err := listenSpec(spec, dir)
	if err != nil {
		return err
	}
	s := &listener{out: json.NewEncoder(out), pending: map[uint64]net.Conn{}}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
		s.mu.Lock()
		s.closed = true
		for _, c := range s.pending {
			c.Close()
		}
		s.mu.Unlock()
	}()
	ev.Event, ev.Control = "listening", control.Addr().String()
	if err := s.write(ev); err != nil {
		return err
	}
	done := make(chan error, 1)
	for _, l := range ls {
		go func() { done <- s.accept(l) }()
	}
	go s.serveTakes(control)
	go func() { done <- s.readCloses(in) }()
	select {
	case err = <-done:
	case <-ctx.Done():
	}
	return err
}

// listener is ServeListener's state.
type listener struct {
	wmu sync.Mutex // held while writing to out, which may block
	out *json.Encoder

	mu      sync.Mutex
	next    uint64
	pending map[uint64]net.Conn
	closed  bool
}

func (s *listener) write(ev Event) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.out.Encode(ev)
}

// accept accepts l's connections, each announced with an "accept" Event.
func (s *listener) accept(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		ev := Event{Event: "accept"}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			ev.Host, ev.Port = a.IP.String(), uint32(a.Port)
		}
		s.mu.Lock()
		if s.closed || len(s.pending) >= maxPending {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.next++
		ev.ID = s.next
		s.pending[ev.ID] = c
		s.mu.Unlock()
		if err := s.write(ev); err != nil {
			return err
		}
	}
}

// take removes connection id from the pending ones and returns it; nil
// when there is none (closed, taken, or never accepted).
func (s *listener) take(id uint64) net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.pending[id]
	delete(s.pending, id)
	return c
}

// readCloses closes the connections the laptop will not take, until in
// ends.
func (s *listener) readCloses(in io.Reader) error {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var m Close
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if c := s.take(m.Close); c != nil {
			c.Close()
		}
	}
	return nil
}

// serveTakes answers take's requests on the control socket: a line with
// an id, answered by one byte, 0 with the connection's descriptor, 1
// when there is no such connection.
func (s *listener) serveTakes(control *net.UnixListener) {
	for {
		c, err := control.AcceptUnix()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			line, err := bufio.NewReader(io.LimitReader(c, 32)).ReadString('\n')
			if err != nil {
				return
			}
			id, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
			conn := s.take(id)
			if err != nil || conn == nil {
				c.Write([]byte{1})
				return
			}
			defer conn.Close()
			f, err := conn.(interface{ File() (*os.File, error) }).File()
			if err != nil {
				c.Write([]byte{1})
				return
			}
			defer f.Close()
			c.WriteMsgUnix([]byte{0}, syscall.UnixRights(int(f.Fd())), nil)
		}()
	}
}

// listenSpec opens spec's listeners; the Event says what they listen on.
func listenSpec(spec ListenSpec, dir string) ([]net.Listener, Event, error) {
	switch spec.Mode {
	case ListenAgent:
		path := filepath.Join(dir, "agent."+strconv.Itoa(os.Getpid()))
		l, err := listenUnix(path)
		if err != nil {
			return nil, Event{}, &ListenError{Addr: path, Err: err}
		}
		return []net.Listener{l}, Event{Path: path}, nil
	case ListenUnix:
		l, err := listenUnix(spec.Path)
		if err != nil {
			return nil, Event{}, &ListenError{Addr: spec.Path, Err: err}
		}
		return []net.Listener{l}, Event{Path: spec.Path}, nil
	}
	ls, err := ListenPort(spec.Host, strconv.FormatUint(uint64(spec.Port), 10))
	if err != nil {
		return nil, Event{}, &ListenError{Addr: spec.String(), Err: err}
	}
	return ls, Event{Port: uint32(ls[0].Addr().(*net.TCPAddr).Port)}, nil
}

// listenUnix listens on the unix socket at path, made 0600 as sshd's
// StreamLocalBindMask 0177 makes it: the umask is narrowed around the
// bind, so no other user can connect between bind and chmod. A stale
// socket there (nothing accepts: a listener killed before it could
// remove it) is replaced; anything else there is "address already in
// use". Closing the listener removes the socket.
func listenUnix(path string) (net.Listener, error) {
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	l, err := net.Listen("unix", path)
	if errors.Is(err, syscall.EADDRINUSE) && staleSocket(path) {
		os.Remove(path)
		l, err = net.Listen("unix", path)
	}
	return l, err
}

// staleSocket reports whether path is a socket of this user's that
// refuses connections.
func staleSocket(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return false
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// privateDirPrefix starts the name of a listener's private directory,
// which goes on "PID-RANDOM".
const privateDirPrefix = "cocoonbox-"

// socketBase is where a listener's private directory goes: the system's
// temporary directory, unless that is so deep ($TMPDIR) that the sockets
// in it would not fit a socket's address (the agent's socket is a path
// every client in the box dials as it is): then /tmp.
func socketBase() string {
	t := os.TempDir()
	if len(t)+len("/"+privateDirPrefix+tempName()+"/agent.4294967295") <= unixsock.Max {
		return t
	}
	return "/tmp"
}

// tempName is the "PID-RANDOM" part of a private directory's name; a
// variable for the test that plants a link where the first would go.
var tempName = func() string {
	b := make([]byte, 6)
	rand.Read(b)
	return strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}

// privateDir makes a fresh directory in base, 0700, as sshd's mkdtemp
// for the agent socket: mkdir(2) creates it or fails, and never follows
// a link or enters a directory someone planted at the name (EEXIST: the
// next name is tried). It first removes the directories that listeners
// of this user killed before they could (their pid is gone).
func privateDir(base string) (string, error) {
	removeStale(base)
	for range 100 {
		p := filepath.Join(base, privateDirPrefix+tempName())
		err := os.Mkdir(p, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		// A umask may have taken bits away, never added any.
		return p, os.Chmod(p, 0o700)
	}
	return "", fmt.Errorf("no free directory name in %s", base)
}

// removeStale removes base's private directories of this user whose
// listener's pid no longer runs. /tmp's sticky bit keeps another user
// from swapping an entry of ours, and RemoveAll follows no link inside.
func removeStale(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), privateDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		p := filepath.Join(base, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Getuid() {
			os.RemoveAll(p)
		}
	}
}

// Take is the box half of one accepted connection, `cocoonbox-agent
// take`: it asks the listener on control for connection id, receives its
// descriptor, writes Ready on out, and copies in to the connection and
// the connection to out as Serve does (eof as Serve's). A connection
// that is gone (closed, taken, never accepted) is a *ConnectError and
// nothing is written.
func Take(control string, id uint64, in io.Reader, out io.Writer, eof io.Writer) error {
	addr := fmt.Sprintf("connection %d of %s", id, control)
	c, err := net.DialTimeout("unix", control, 30*time.Second)
	if err != nil {
		return &ConnectError{Addr: addr, Err: err}
	}
	uc := c.(*net.UnixConn)
	defer uc.Close()
	uc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(uc, "%d\n", id); err != nil {
		return &ConnectError{Addr: addr, Err: err}
	}
	b := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(b, oob)
	if err != nil || n != 1 || b[0] != 0 {
		return &ConnectError{Addr: addr, Err: errGone}
	}
	conn, err := receivedConn(oob[:oobn])
	if err != nil {
		return &ConnectError{Addr: addr, Err: err}
	}
	return pipe(conn, addr, in, out, true, eof)
}

var errGone = errors.New("the connection has gone")

// receivedConn is the connection whose descriptor came in oob.
func receivedConn(oob []byte) (net.Conn, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("no descriptor received")
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, errors.New("no descriptor received")
	}
	f := os.NewFile(uintptr(fds[0]), "accepted")
	defer f.Close()
	return net.FileConn(f)
}
