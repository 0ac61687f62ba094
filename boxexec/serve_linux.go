package boxexec

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// Serve is the exec server: it connects to the host's socket at path,
// says hello, and starts each command the host sends until the host
// closes the connection. Commands it started go on after it; their exits
// are then not reported.
func Serve(path string) error {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return err
	}
	defer c.Close()
	s := &server{c: c, cmds: map[uint64]*child{}}
	if err := s.send(&message{Op: "hello", Version: Version}); err != nil {
		return err
	}
	buf := make([]byte, MaxRequest+1)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	for {
		n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
		var files []*os.File
		if oobn > 0 {
			for _, fd := range parseRights(oob[:oobn]) {
				files = append(files, os.NewFile(uintptr(fd), "exec-stream"))
			}
		}
		if err != nil || n == 0 {
			closeFiles(files)
			if err == nil {
				return nil
			}
			return err
		}
		var m message
		if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 || json.Unmarshal(buf[:n], &m) != nil {
			closeFiles(files)
			continue
		}
		switch m.Op {
		case "exec":
			s.start(m.ID, m.Req, files)
		case "signal":
			closeFiles(files)
			s.signal(m.ID, syscall.Signal(m.Signal))
		case "kill":
			closeFiles(files)
			s.kill(m.ID, time.Duration(m.DelayMS)*time.Millisecond)
		case "resize":
			closeFiles(files)
			s.resize(m.ID, m.Rows, m.Cols)
		default:
			closeFiles(files)
		}
	}
}

// parseRights is the descriptors an oob buffer carries, closed on exec
// and blocking: the host's pipes come non-blocking (the flag is the
// pipe's, shared), and a command expects a blocking stdin.
func parseRights(oob []byte) []int {
	msgs, _ := syscall.ParseSocketControlMessage(oob)
	var all []int
	for _, m := range msgs {
		fds, _ := syscall.ParseUnixRights(&m)
		for _, fd := range fds {
			syscall.CloseOnExec(fd)
			syscall.SetNonblock(fd, false)
			all = append(all, fd)
		}
	}
	return all
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

type server struct {
	c   *net.UnixConn
	wmu sync.Mutex
	mu  sync.Mutex
	// cmds are the commands not yet reaped, by the host's id.
	cmds map[uint64]*child
}

// child is one command: until reaped is set (under server.mu) its pid
// is held, as a zombie at worst, so a signal to its group reaches it.
type child struct {
	cmd    *exec.Cmd
	reaped bool
	killAt time.Time
	// term is the command's terminal, when it has one.
	term *terminal
}

func (s *server) send(m *message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err = s.c.Write(b)
	return err
}

func (s *server) start(id uint64, req *Request, files []*os.File) {
	defer func() { closeFiles(files) }()
	want := 3
	if req != nil && req.TTY != nil {
		want = 2
	}
	if req == nil || len(files) != want || req.Path == "" || len(req.Args) == 0 {
		s.send(&message{Op: "started", ID: id, Errno: int(syscall.EINVAL), Error: "a bad exec request"})
		return
	}
	cmd := &exec.Cmd{Path: req.Path, Args: req.Args, Dir: req.Dir, Env: environ(os.Environ(), req.Env)}
	var term *terminal
	if req.TTY != nil {
		var err error
		if term, err = openTerminal(cmd, req.TTY, files[0], files[1]); err != nil {
			s.send(&message{Op: "started", ID: id, Error: err.Error()})
			return
		}
		files = nil // the terminal's relay has them

	} else {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
		proc.NewSession(cmd)
	}
	s.mu.Lock()
	err := cmd.Start()
	if term != nil {
		// The child has its own copy of the terminal's far side.
		term.tty.Close()
	}
	if err != nil {
		s.mu.Unlock()
		if term != nil {
			term.close()
		}
		m := &message{Op: "started", ID: id, Error: err.Error()}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			m.Errno = int(errno)
		}
		s.send(m)
		return
	}
	c := &child{cmd: cmd, term: term}
	s.cmds[id] = c
	s.mu.Unlock()
	if term != nil {
		term.relay()
	}
	s.send(&message{Op: "started", ID: id, Pid: cmd.Process.Pid})
	go s.wait(id, c)
}

// wait reaps c and reports its exit. A kill under way first waits out its
// delay while other processes of the group live, and sends its SIGKILL,
// while the leader's pid is still held.
func (s *server) wait(id uint64, c *child) {
	pid := c.cmd.Process.Pid
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != syscall.EINTR {
			break
		}
	}
	s.mu.Lock()
	at := c.killAt
	s.mu.Unlock()
	if !at.IsZero() {
		for time.Now().Before(at) && proc.GroupLive(pid) {
			time.Sleep(20 * time.Millisecond)
		}
		proc.SignalGroup(pid, syscall.SIGKILL)
	}
	s.mu.Lock()
	c.reaped = true
	delete(s.cmds, id)
	s.mu.Unlock()
	c.cmd.Wait()
	if c.term != nil {
		// What the command wrote reaches the host before its exit does.
		c.term.finish()
	}
	m := &message{Op: "exit", ID: id}
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		m.Signal = int(ws.Signal())
	} else {
		m.Code = c.cmd.ProcessState.ExitCode()
	}
	s.send(m)
}

func (s *server) signal(id uint64, sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cmds[id]; c != nil && !c.reaped && sig > 0 {
		proc.SignalGroup(c.cmd.Process.Pid, sig)
	}
}

func (s *server) kill(id uint64, delay time.Duration) {
	s.mu.Lock()
	c := s.cmds[id]
	if c == nil || c.reaped {
		s.mu.Unlock()
		return
	}
	if c.killAt.IsZero() {
		c.killAt = time.Now().Add(delay)
	}
	s.mu.Unlock()
	s.signal(id, syscall.SIGHUP)
	time.AfterFunc(delay, func() { s.signal(id, syscall.SIGKILL) })
}

func (s *server) resize(id uint64, rows, cols uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The terminal is closed only after the command is reaped.
	if c := s.cmds[id]; c != nil && !c.reaped && c.term != nil && rows > 0 && cols > 0 {
		c.term.setSize(rows, cols)
	}
}

// environ is base with over laid on it: a later entry of a name wins.
func environ(base, over []string) []string {
	idx := map[string]int{}
	var out []string
	for _, kv := range append(base, over...) {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}
