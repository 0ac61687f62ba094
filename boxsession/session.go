package boxsession

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
)

// session is one command the holder keeps, with what its client has not
// acknowledged.
type session struct {
	h      *Holder
	id     string
	window time.Duration
	cmd    *exec.Cmd
	stdin  io.WriteCloser

	mu   sync.Mutex
	cond *sync.Cond
	// out are stdout and stderr: out[i].buf holds the bytes from offset
	// out[i].base on that the client has not acknowledged; sent is how far
	// the current attachment has sent.
	out [2]outBuf
	// in is stdin received and not yet written to the command, from
	// offset inWritten; inRecv is the offset past it, inEOF where the
	// client closed it (-1: open).
	in        []byte
	inWritten uint64
	inRecv    uint64
	inEOF     int64
	// exit is set once the command has exited and its output ended.
	exit *sessionwire.Frame
	// conn is the current attachment, nil while detached; gen counts them.
	conn net.Conn
	gen  int
	// done is set when the session is over (bye, window, kill after exit).
	done  bool
	timer *time.Timer
	// closeOut is set when the client reads no more stdout.
	closeOut bool
	pipes    [2]*os.File
}

type outBuf struct {
	buf  []byte
	base uint64
	sent uint64
	eof  bool
}

// exitedWindow bounds how long an exited session waits for its client.
const exitedWindow = 2 * time.Minute

// killDelay is how long a command's group has between SIGHUP and SIGKILL.
const killDelay = 2 * time.Second

func (h *Holder) start(req *request) (*session, error) {
	shell := envOf(req.Env, "SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	cmd := &exec.Cmd{Path: shell, Dir: req.Dir, Env: req.Env}
	if req.Line == "" {
		cmd.Args = []string{"-" + filepath.Base(shell)}
	} else {
		cmd.Args = []string{filepath.Base(shell), "-c", req.Line}
	}
	proc.NewSession(cmd)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	var ours, theirs [2]*os.File
	for i := range ours {
		r, w, err := os.Pipe()
		if err != nil {
			inR.Close()
			inW.Close()
			closeFiles(ours[:i])
			closeFiles(theirs[:i])
			return nil, err
		}
		proc.GrowPipe(r, 1<<20)
		ours[i], theirs[i] = r, w
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, theirs[0], theirs[1]
	err = cmd.Start()
	inR.Close()
	closeFiles(theirs[:])
	if err != nil {
		inW.Close()
		closeFiles(ours[:])
		return nil, err
	}
	s := &session{h: h, id: req.ID, window: req.Window, cmd: cmd, stdin: inW, inEOF: -1, pipes: ours}
	s.cond = sync.NewCond(&s.mu)
	var pumps sync.WaitGroup
	for i, f := range ours {
		pumps.Add(1)
		go func() {
			defer pumps.Done()
			s.pump(i, f)
		}()
	}
	go s.feed()
	go func() {
		pumps.Wait()
		err := cmd.Wait()
		x := exitFrame(cmd.ProcessState, err)
		s.mu.Lock()
		s.exit = &x
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	return s, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

func envOf(env []string, k string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if len(env[i]) > len(k) && env[i][:len(k)] == k && env[i][len(k)] == '=' {
			return env[i][len(k)+1:]
		}
	}
	return ""
}

func exitFrame(ps *os.ProcessState, err error) sessionwire.Frame {
	if ps == nil {
		return sessionwire.Frame{Type: sessionwire.Exit, Code: 255, Text2: err.Error()}
	}
	if sig := proc.ExitSignal(ps); sig != "" {
		return sessionwire.Frame{Type: sessionwire.Exit, Text: sig}
	}
	return sessionwire.Frame{Type: sessionwire.Exit, Code: int32(ps.ExitCode())}
}

// pump reads output stream i of the command while what the client has
// not acknowledged is under the bound: a command that writes faster than
// an absent client reads waits, as under ssh's window.
func (s *session) pump(i int, f *os.File) {
	buf := make([]byte, 256<<10)
	for {
		s.mu.Lock()
		for len(s.out[i].buf) >= s.h.bound() && !s.done {
			s.cond.Wait()
		}
		s.mu.Unlock()
		n, err := f.Read(buf)
		s.mu.Lock()
		if n > 0 && !s.done && !(i == 0 && s.closeOut) {
			s.out[i].buf = append(s.out[i].buf, buf[:n]...)
		}
		if err != nil {
			s.out[i].eof = true
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		if err != nil {
			f.Close()
			return
		}
	}
}

// feed writes stdin to the command as it comes.
func (s *session) feed() {
	for {
		s.mu.Lock()
		for len(s.in) == 0 && !(s.inEOF >= 0 && uint64(s.inEOF) == s.inWritten) && !s.done {
			s.cond.Wait()
		}
		if len(s.in) == 0 {
			s.mu.Unlock()
			s.stdin.Close()
			return
		}
		b := s.in[:min(len(s.in), 256<<10)]
		s.mu.Unlock()
		_, err := s.stdin.Write(b)
		s.mu.Lock()
		if err != nil {
			// The command closed its stdin: the rest is dropped, as sshd
			// does, and still acknowledged.
			b = s.in
		}
		s.in = s.in[len(b):]
		if len(s.in) == 0 {
			s.in = nil
		}
		s.inWritten += uint64(len(b))
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// attach serves the client on c until c ends: what it sends is applied,
// the output it lacks is sent. The previous attachment, if any, is closed.
//
// On an open the client sends no Resume (it has nothing yet), so that its
// first stdin goes with the Exec's start; on an attach its first frame is
// the Resume that says where its output stands.
func (s *session) attach(c net.Conn, r *bufio.Reader, resume bool) {
	s.mu.Lock()
	if s.conn != nil {
		s.conn.Close()
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.gen++
	gen := s.gen
	s.conn = c
	hello := sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Hello, Off: s.inWritten, Text: s.id})
	s.mu.Unlock()
	w := &connWriter{c: c}
	w.write(hello)
	f := sessionwire.Frame{Type: sessionwire.Resume}
	var err error
	if resume {
		f, err = sessionwire.Read(r)
	}
	if err == nil && f.Type == sessionwire.Resume {
		s.mu.Lock()
		s.ack(0, f.Off)
		s.ack(1, f.Off2)
		s.out[0].sent, s.out[1].sent = max(f.Off, s.out[0].base), max(f.Off2, s.out[1].base)
		s.mu.Unlock()
		go s.send(w, gen)
		for err == nil {
			if f, err = sessionwire.Read(r); err == nil {
				err = s.apply(f)
			}
		}
	}
	c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	s.conn = nil
	s.cond.Broadcast()
	if !s.done {
		// An exited command whose client went without its bye is kept
		// less long: only a client cut as the exit went out comes back.
		window := s.window
		if s.exit != nil {
			window = min(window, exitedWindow)
		}
		s.timer = time.AfterFunc(window, func() { s.expire(gen) })
	}
}

// ack drops output stream i up to off. s.mu is held.
func (s *session) ack(i int, off uint64) {
	o := &s.out[i]
	if off <= o.base {
		return
	}
	n := min(off-o.base, uint64(len(o.buf)))
	o.buf = o.buf[n:]
	o.base += n
	if len(o.buf) == 0 {
		o.buf = nil
	} else if cap(o.buf) > 2*s.h.bound() {
		o.buf = append([]byte(nil), o.buf...)
	}
	s.cond.Broadcast()
}

// apply applies one frame from the client.
func (s *session) apply(f sessionwire.Frame) error {
	switch f.Type {
	case sessionwire.Data:
		s.mu.Lock()
		if f.Stream == sessionwire.Stdin && s.inEOF < 0 {
			end := f.Off + uint64(len(f.Data))
			if f.Off <= s.inRecv && end > s.inRecv {
				s.in = append(s.in, f.Data[s.inRecv-f.Off:]...)
				s.inRecv = end
				s.cond.Broadcast()
			}
		}
		s.mu.Unlock()
	case sessionwire.EOF:
		s.mu.Lock()
		if f.Off == s.inRecv && s.inEOF < 0 {
			s.inEOF = int64(f.Off)
			s.cond.Broadcast()
		}
		s.mu.Unlock()
	case sessionwire.Ack:
		s.mu.Lock()
		if f.Stream == sessionwire.Stdout || f.Stream == sessionwire.Stderr {
			s.ack(int(f.Stream)-1, f.Off)
		}
		s.mu.Unlock()
	case sessionwire.Signal:
		if sig := proc.SignalNum(f.Text); sig != 0 {
			s.signal(sig)
		}
	case sessionwire.CloseStdout:
		s.mu.Lock()
		s.closeOut = true
		s.out[0].buf = nil
		s.pipes[0].Close()
		s.cond.Broadcast()
		s.mu.Unlock()
	case sessionwire.Kill:
		s.kill()
	case sessionwire.Bye:
		s.end()
		return io.EOF
	}
	return nil
}

// signal sends sig to the command's process group while its leader is
// not reaped.
func (s *session) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exit == nil {
		proc.SignalGroup(s.cmd.Process.Pid, sig)
	}
}

// kill ends the command: SIGHUP to its group, SIGKILL after killDelay.
func (s *session) kill() {
	s.signal(syscall.SIGHUP)
	time.AfterFunc(killDelay, func() { s.signal(syscall.SIGKILL) })
}

// expire ends a session whose client has not come back within the window.
func (s *session) expire(gen int) {
	s.mu.Lock()
	stale := s.gen != gen || s.conn != nil
	s.mu.Unlock()
	if stale {
		return
	}
	s.h.logf("session %s: no client for %s: ending the command", s.id, s.window)
	s.kill()
	s.end()
}

// end forgets the session.
func (s *session) end() {
	s.mu.Lock()
	s.done = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.h.forget(s.id)
}

// send sends the attachment what its client lacks: output from where it
// stands, stdin acks, and the exit after the last output.
func (s *session) send(w *connWriter, gen int) {
	var frame []byte
	var ackedIn uint64
	exitSent := false
	for {
		s.mu.Lock()
		for s.gen == gen && !s.done && !s.pending(ackedIn, exitSent) {
			s.cond.Wait()
		}
		if s.gen != gen || s.done {
			s.mu.Unlock()
			return
		}
		frame = frame[:0]
		for i := range s.out {
			o := &s.out[i]
			if end := o.base + uint64(len(o.buf)); o.sent < end {
				b := o.buf[o.sent-o.base:]
				b = b[:min(len(b), 256<<10)]
				frame = sessionwire.AppendData(frame, byte(i+1), o.sent, b)
				o.sent += uint64(len(b))
			}
		}
		if s.inWritten != ackedIn {
			ackedIn = s.inWritten
			frame = sessionwire.Append(frame, sessionwire.Frame{Type: sessionwire.Ack, Stream: sessionwire.Stdin, Off: ackedIn})
		}
		if len(frame) == 0 && s.exit != nil && !exitSent {
			frame = sessionwire.Append(frame, *s.exit)
			exitSent = true
		}
		s.mu.Unlock()
		if !w.write(frame) {
			return
		}
	}
}

// pending reports whether the attachment has something to send. s.mu is
// held.
func (s *session) pending(ackedIn uint64, exitSent bool) bool {
	for i := range s.out {
		if s.out[i].sent < s.out[i].base+uint64(len(s.out[i].buf)) {
			return true
		}
	}
	return s.inWritten != ackedIn || s.exit != nil && !exitSent
}

// connWriter writes frames to an attachment; false once it failed.
type connWriter struct {
	c   net.Conn
	err error
}

func (w *connWriter) write(b []byte) bool {
	if w.err == nil {
		_, w.err = w.c.Write(b)
	}
	return w.err == nil
}
