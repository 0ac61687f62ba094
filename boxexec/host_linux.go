package boxexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

	"github.com/cocoonbox/cocoonbox/internal/unixsock"
)

// helloWait is how long a new connection has to say hello.
const helloWait = 10 * time.Second

// writeWait bounds a write to the exec server: a server that stops
// reading loses its connection rather than holding up the host.
const writeWait = 10 * time.Second

// maxConns is how many connections from one box the host keeps open at
// once (the server's, an old one's, greetings): more are closed at once,
// so a box that opens many costs the host no more than these.
const maxConns = 4

// startWait bounds the wait for a started reply.
const startWait = 30 * time.Second

// Host is the local box's end of one box's exec server: a listener the
// server connects to, and the connection of the server that said hello
// last. The box's side is hostile: the host only reads bounded messages
// from it, closes any descriptor it sends, never signals or opens
// anything on its word, and waits for it with deadlines.
type Host struct {
	lis  *net.UnixListener
	path string

	peer func(pid int) error

	mu     sync.Mutex
	conns  int // open connections
	cur    *conn
	change chan struct{} // closed when cur changes
	closed bool
	done   chan struct{} // closed by Close
}

// Listen listens at path, a socket in a directory of the caller's that
// nothing else writes (an old socket there is replaced), readable by the
// box user through a bind mount.
func Listen(path string) (*Host, error) { return ListenPeer(path, nil) }

// ListenPeer is Listen with a second check beside the directory's: a
// connection is taken only when peer, given the pid of the process that
// made it (SO_PEERCRED, in the caller's pid namespace), returns nil.
func ListenPeer(path string, peer func(pid int) error) (*Host, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	lis, err := unixsock.ListenPacket(path)
	if err != nil {
		return nil, err
	}
	// The box's user (uid 1000, or another of the image) connects; the
	// directory above keeps everyone else of the host out.
	if err := os.Chmod(path, 0o666); err != nil {
		lis.Close()
		return nil, err
	}
	h := &Host{lis: lis, path: path, peer: peer, change: make(chan struct{}), done: make(chan struct{})}
	go h.accept()
	return h, nil
}

// acceptRate bounds how many connections a second the host takes from a
// box (maxConns at once): an honest server connects once a box start, and
// a box that connects in a loop then costs the host next to nothing.
const acceptRate = 10

func (h *Host) accept() {
	lim := rate.NewLimiter(acceptRate, maxConns)
	for {
		lim.Wait(context.Background())
		c, err := h.lis.AcceptUnix()
		if err != nil {
			return
		}
		h.mu.Lock()
		full := h.conns >= maxConns
		if !full {
			h.conns++
		}
		h.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		go func() {
			h.greet(c)
			h.mu.Lock()
			h.conns--
			h.mu.Unlock()
		}()
	}
}

// greet takes c as the box's exec server once it says hello.
func (h *Host) greet(c *net.UnixConn) {
	if h.peer != nil {
		cred, err := peerCred(c)
		if err == nil {
			err = h.peer(int(cred.Pid))
		}
		if err != nil {
			c.Close()
			return
		}
	}
	c.SetReadDeadline(time.Now().Add(helloWait))
	m, err := readMessage(c)
	if err != nil || m.Op != "hello" || m.Version != Version {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	k := &conn{c: c, cmds: map[uint64]*Cmd{}, done: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		c.Close()
		return
	}
	h.cur = k
	close(h.change)
	h.change = make(chan struct{})
	h.mu.Unlock()
	k.read()
	h.mu.Lock()
	if h.cur == k {
		h.cur = nil
		close(h.change)
		h.change = make(chan struct{})
	}
	h.mu.Unlock()
}

// Connected reports whether an exec server is connected.
func (h *Host) Connected() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur != nil
}

// WaitConnected waits up to d for an exec server, and reports whether
// one is connected.
func (h *Host) WaitConnected(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		h.mu.Lock()
		ok, ch, closed := h.cur != nil, h.change, h.closed
		h.mu.Unlock()
		if ok || closed {
			return ok
		}
		select {
		case <-ch:
		case <-t.C:
			return h.Connected()
		}
	}
}

// Await waits until an exec server is connected (connected true) or
// none is (false), and reports true; false once the host is closed.
func (h *Host) Await(connected bool) bool {
	for {
		h.mu.Lock()
		now, ch, closed := h.cur != nil, h.change, h.closed
		h.mu.Unlock()
		if closed {
			return false
		}
		if now == connected {
			return true
		}
		<-ch
	}
}

// Done is closed when the host is.
func (h *Host) Done() <-chan struct{} { return h.done }

// Drop closes the connection of the current exec server, if any: its
// commands' waits end with an error. For tests of the fallback, and a
// box whose container went.
func (h *Host) Drop() {
	h.mu.Lock()
	k := h.cur
	h.mu.Unlock()
	if k != nil {
		k.c.Close()
	}
}

// Close stops listening, removes the socket and drops the server.
func (h *Host) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.done)
	k := h.cur
	close(h.change)
	h.change = make(chan struct{})
	h.mu.Unlock()
	h.lis.Close()
	os.Remove(h.path)
	if k != nil {
		k.c.Close()
	}
}

// Start has the exec server start req with stdin, stdout and stderr (the
// command's ends of its pipes, which the caller closes after; stderr is
// nil for a request with a TTY, whose output all comes on stdout). It
// fails with ErrNoServer or ErrTooLarge when nothing ran, with a
// *StartError when the server could not start the command.
func (h *Host) Start(req *Request, stdin, stdout, stderr *os.File) (*Cmd, error) {
	h.mu.Lock()
	k := h.cur
	h.mu.Unlock()
	if k == nil {
		return nil, ErrNoServer
	}
	files := []*os.File{stdin, stdout}
	if req.TTY == nil {
		files = append(files, stderr)
	}
	return k.start(req, files)
}

// conn is one exec server's connection.
type conn struct {
	c    *net.UnixConn
	wmu  sync.Mutex
	mu   sync.Mutex
	next uint64
	cmds map[uint64]*Cmd
	dead error
	done chan struct{}
}

func (k *conn) start(req *Request, files []*os.File) (*Cmd, error) {
	k.mu.Lock()
	if k.dead != nil {
		k.mu.Unlock()
		return nil, ErrNoServer
	}
	k.next++
	x := &Cmd{k: k, id: k.next, started: make(chan struct{}), exited: make(chan struct{})}
	k.cmds[x.id] = x
	k.mu.Unlock()
	b, err := json.Marshal(&message{Op: "exec", ID: x.id, Req: req})
	if err == nil && len(b) > MaxRequest {
		err = ErrTooLarge
	}
	var fds []int
	for _, f := range files {
		if err != nil {
			break
		}
		// Fd would make f blocking; SyscallConn leaves it be.
		rc, e := f.SyscallConn()
		if e != nil {
			err = e
			break
		}
		rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) })
	}
	if err == nil {
		k.wmu.Lock()
		k.c.SetWriteDeadline(time.Now().Add(writeWait))
		_, _, err = k.c.WriteMsgUnix(b, syscall.UnixRights(fds...), nil)
		k.wmu.Unlock()
		if err != nil {
			// A packet goes whole or not at all: nothing ran.
			k.c.Close()
			err = ErrNoServer
		}
	}
	if err != nil {
		k.forget(x.id)
		return nil, err
	}
	t := time.NewTimer(startWait)
	defer t.Stop()
	select {
	case <-x.started:
	case <-k.done:
	case <-t.C:
		k.c.Close()
		<-k.done
	}
	select {
	case <-x.started:
	default:
		k.forget(x.id)
		k.mu.Lock()
		err := k.dead
		k.mu.Unlock()
		return nil, errors.New("the box's exec server went away: " + err.Error())
	}
	if x.startErr != nil {
		k.forget(x.id)
		return nil, x.startErr
	}
	return x, nil
}

func (k *conn) forget(id uint64) {
	k.mu.Lock()
	delete(k.cmds, id)
	k.mu.Unlock()
}

func (k *conn) send(m *message) {
	b, _ := json.Marshal(m)
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.c.SetWriteDeadline(time.Now().Add(writeWait))
	if _, err := k.c.Write(b); err != nil {
		k.c.Close()
	}
}

// read applies the server's messages until its connection ends, then
// ends every command's wait that has not had its exit.
func (k *conn) read() {
	var err error
loop:
	for {
		var m *message
		if m, err = readMessage(k.c); err != nil {
			break
		}
		k.mu.Lock()
		x := k.cmds[m.ID]
		k.mu.Unlock()
		// An honest server sends one started, then one exit, for each
		// command the host gave it: anything else (an id it was not
		// given or whose exit it sent, a second started, an exit before
		// started, another op) is a box flooding the host, whose reads
		// cost the host's CPU outside the box's cgroup: it loses its
		// connection.
		if x == nil {
			err = fmt.Errorf("the exec server sent %.20q for command %d, which it does not run", m.Op, m.ID)
			break
		}
		started := false
		select {
		case <-x.started:
			started = true
		default:
		}
		switch {
		case m.Op == "started" && !started:
			x.once.Do(func() {
				x.pid = m.Pid
				if m.Pid <= 0 {
					x.startErr = &StartError{Errno: syscall.Errno(max(m.Errno, 0)), Msg: m.Error}
				}
				close(x.started)
			})
		case m.Op == "exit" && started:
			x.exitOnce.Do(func() {
				x.exit = Exit{Code: m.Code, Signal: syscall.Signal(m.Signal)}
				close(x.exited)
				x.wake()
			})
			k.forget(m.ID)
		default:
			err = fmt.Errorf("the exec server sent %.20q out of turn for command %d", m.Op, m.ID)
			break loop
		}
	}
	k.c.Close()
	k.mu.Lock()
	k.dead = err
	cmds := k.cmds
	k.cmds = map[uint64]*Cmd{}
	k.mu.Unlock()
	close(k.done)
	for _, x := range cmds {
		x.exitOnce.Do(func() {
			x.exit = Exit{Err: errors.New("the box's exec server went away")}
			close(x.exited)
			x.wake()
		})
	}
}

// readMessage reads one packet of at most maxReply bytes; descriptors
// that came with it are closed.
func readMessage(c *net.UnixConn) (*message, error) {
	b := make([]byte, maxReply)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(b, oob)
	if oobn > 0 {
		closeRights(oob[:oobn])
	}
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("the exec server closed its connection")
	}
	if flags&syscall.MSG_TRUNC != 0 {
		return nil, errors.New("a message from the exec server is too long")
	}
	var m message
	if err := json.Unmarshal(b[:n], &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// closeRights closes the descriptors an oob buffer carries.
func closeRights(oob []byte) []int {
	msgs, _ := syscall.ParseSocketControlMessage(oob)
	var all []int
	for _, m := range msgs {
		fds, _ := syscall.ParseUnixRights(&m)
		all = append(all, fds...)
	}
	for _, fd := range all {
		syscall.Close(fd)
	}
	return all
}

// Cmd is a command the exec server started.
type Cmd struct {
	k        *conn
	id       uint64
	once     sync.Once
	started  chan struct{}
	pid      int
	startErr error
	exitOnce sync.Once
	exited   chan struct{}
	exit     Exit
	omu      sync.Mutex
	outs     []*os.File
}

// Output is f, the host's end of the command's stdout or stderr, read
// as the engine's exec API reads an exec's: until the command has exited
// and f is then empty. What the command wrote before it exited is all
// read; a background process that holds the pipe after does not keep
// the reader waiting (it is dropped once the pipe is empty).
func (x *Cmd) Output(f *os.File) io.ReadCloser {
	x.omu.Lock()
	x.outs = append(x.outs, f)
	x.omu.Unlock()
	return &output{f: f, exited: x.exited}
}

// wake ends the blocked reads of the outputs: they drain what is left.
func (x *Cmd) wake() {
	x.omu.Lock()
	defer x.omu.Unlock()
	for _, f := range x.outs {
		f.SetReadDeadline(time.Now())
	}
}

// output is a Cmd's Output.
type output struct {
	f      *os.File
	exited chan struct{}
}

func (o *output) Read(p []byte) (int, error) {
	select {
	case <-o.exited:
		return o.drain(p)
	default:
	}
	n, err := o.f.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return o.drain(p)
	}
	return n, err
}

// drain reads what the pipe holds without waiting; an empty pipe is EOF.
func (o *output) drain(p []byte) (int, error) {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	for {
		// wake's deadline may come after this one's reset: try again.
		o.f.SetReadDeadline(time.Time{})
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), p)
			return true
		})
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n > 0 {
			return n, nil
		}
		if rerr == nil || rerr == syscall.EAGAIN {
			return 0, io.EOF
		}
		return 0, rerr
	}
}

func (o *output) Close() error { return o.f.Close() }

// Pid is the command's pid in the box (its process group's id there).
func (x *Cmd) Pid() int { return x.pid }

// Signal has the server send sig to the command's process group, unless
// the command was reaped.
func (x *Cmd) Signal(sig syscall.Signal) {
	x.k.send(&message{Op: "signal", ID: x.id, Signal: int(sig)})
}

// Resize sets the size of the command's terminal (a request with a TTY),
// unless the command was reaped: the kernel sends its foreground group
// SIGWINCH.
func (x *Cmd) Resize(rows, cols uint16) {
	x.k.send(&message{Op: "resize", ID: x.id, Rows: rows, Cols: cols})
}

// Kill has the server send SIGHUP to the command's process group, and
// SIGKILL after delay (before it reaps the command, at the latest).
func (x *Cmd) Kill(delay time.Duration) {
	x.k.send(&message{Op: "kill", ID: x.id, DelayMS: delay.Milliseconds()})
}

// Wait waits for the command's exit, or for its server to go away.
func (x *Cmd) Wait() Exit {
	<-x.exited
	return x.exit
}

// peerCred is the credentials of the process that connected c.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	cerr := rc.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return nil, cerr
	}
	return cred, err
}
