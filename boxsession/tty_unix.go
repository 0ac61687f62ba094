//go:build linux || darwin

package boxsession

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/ttymodes"
)

// ttyDrain is how long a terminal's output is still read after its
// command exited: a process left in the background may hold the
// terminal open for ever.
const ttyDrain = 200 * time.Millisecond

// startTTY starts req's command on a terminal of its own, which the
// holder keeps (and with it the command) while no client is attached:
// its output is stdout, its input stdin; stderr stays empty.
func (h *Holder) startTTY(req *request) (*session, error) {
	shell := envOf(req.Env, "SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	cmd := &exec.Cmd{Path: shell, Dir: req.Dir, Env: append(req.Env[:len(req.Env):len(req.Env)], "TERM="+req.TTY.Term)}
	if req.Line == "" {
		cmd.Args = []string{"-" + filepath.Base(shell)}
	} else {
		cmd.Args = []string{filepath.Base(shell), "-c", req.Line}
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	// 0×0 stays 0×0, as sshd leaves it.
	pty.Setsize(ptmx, &pty.Winsize{Rows: uint16(req.TTY.Rows), Cols: uint16(req.TTY.Cols)})
	if len(req.TTY.Modes) > 0 {
		if t, err := ttymodes.Get(int(tty.Fd())); err == nil {
			ttymodes.Apply(t, req.TTY.Modes)
			ttymodes.Set(int(tty.Fd()), t)
		}
	}
	// Of Go's poller, so that a read deadline ends the last read.
	fd, err := unix.FcntlInt(ptmx.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	ptmx.Close()
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		return nil, err
	}
	ptmx = os.NewFile(uintptr(fd), "ptmx")
	cmd.Env = append(cmd.Env, "SSH_TTY="+tty.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		return nil, err
	}
	s := &session{h: h, id: req.ID, window: req.Window, cmd: cmd, stdin: ttyInput{ptmx}, inEOF: -1,
		pipes: [2]*os.File{ptmx}, tty: ptmx, line: req.Line, started: time.Now(), owner: req.Owner}
	s.in.Limit = h.bound()
	for i := range s.out {
		s.out[i].Limit = h.bound()
	}
	s.out[1].eof = true
	s.cond = sync.NewCond(&s.mu)
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		s.pump(0, ptmx)
	}()
	go s.feed()
	go func() {
		err := cmd.Wait()
		ptmx.SetReadDeadline(time.Now().Add(ttyDrain))
		<-pumped
		x := exitFrame(cmd.ProcessState, err)
		s.mu.Lock()
		s.exit = &x
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	return s, nil
}

// ttyInput writes a terminal session's stdin to its terminal; the end of
// stdin does not hang the terminal up (a client's terminal sends ^D as a
// byte).
type ttyInput struct{ f *os.File }

func (t ttyInput) Write(b []byte) (int, error) { return t.f.Write(b) }
func (t ttyInput) Close() error                { return nil }

// resize sets a terminal session's size; a session without a terminal
// ignores it.
func (s *session) resize(rows, cols uint32) {
	if s.tty == nil {
		return
	}
	rc, err := s.tty.SyscallConn()
	if err != nil {
		return
	}
	w := &unix.Winsize{Row: uint16(rows), Col: uint16(cols)}
	rc.Control(func(fd uintptr) { unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, w) })
}
