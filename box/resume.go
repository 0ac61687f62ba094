package box

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// DefaultResumeWindow is how long a plain command is kept in its box for
// its client to come back, and how long the client tries.
const DefaultResumeWindow = 5 * time.Minute

// Resume makes Exec's commands outlive their stream (docs/protocol.md
// "Resumable sessions"): each runs under the box's `cocoonbox-agent
// session`, and when its stream ends without the command's exit (a reset,
// the service's one-hour cap, keepalive giving up on a frozen or changed
// network) the client dials again and takes the command back where it
// was, with no byte lost or repeated.
type Resume struct {
	// Window is how long the box keeps a command whose client is gone, and
	// how long the client tries to come back; 0 means DefaultResumeWindow.
	Window time.Duration
	// Notify, if not nil, gets one line when a stream is lost, while the
	// client reconnects, when it resumed or gave up, and when the box
	// cannot hold sessions (never the command's stdout).
	Notify io.Writer
	// Agent is the box's agent command; empty means cocoonbox-agent.
	Agent string
}

// WithResume makes the client's Execs without a terminal resumable.
func WithResume(r Resume) DialOption {
	return func(o *dialOptions) { o.resume = &r }
}

// Bounds of what the client keeps: stdin sent and not acknowledged (past
// it stdin is not read), and how much output it takes before it
// acknowledges.
const (
	resumeStdinBound = 4 << 20
	resumeAckEvery   = 256 << 10
)

// lostError is a stream that ended without the command's exit for a
// reason of the transport: the command may still run in the box.
type lostError struct {
	err  error
	code codes.Code
}

func (e *lostError) Error() string { return e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// lost wraps a transport error of an Exec as a lostError.
func (c *Client) lost(op string, err error) error {
	return &lostError{err: c.wrap(op, err), code: status.Code(err)}
}

// rsession is the client's side of one resumable command.
type rsession struct {
	c   *Client
	cmd *Command
	id  string
	r   Resume

	mu   sync.Mutex
	cond *sync.Cond
	// in holds stdin read and not acknowledged, from offset inBase to
	// inRead; inEOF is set once stdin ended.
	in     []byte
	inBase uint64
	inRead uint64
	inEOF  bool
	// out is how much of stdout and stderr the caller has been given;
	// acked how much the box was told.
	out, acked [2]uint64
	// hello is set once the box's agent answered: the session exists.
	hello bool
	// lostAt is when the stream was lost, until the box answers again.
	lostAt time.Time
	// lostAtSeen is the loss the reconnecting line was said for.
	lostAtSeen time.Time
	exit       *ExitStatus
	fail       string
	cur        *attempt
	// file is stdin when it is a regular file, read from fileBase on.
	file     *os.File
	fileBase int64
	// dropStdout is set once the caller reads no more stdout.
	dropStdout atomic.Bool
	done       bool
}

// attempt is one Exec of the agent, carrying the session's frames.
type attempt struct {
	s      *rsession
	exited chan struct{}
	// prefix goes first: the Resume of an attach.
	prefix  []byte
	pr      *io.PipeReader
	pw      *io.PipeWriter
	wmu     sync.Mutex
	sent    uint64
	eofSent bool
	dead    bool
	ps      sessionwire.Parser
}

func (a *attempt) write(b []byte) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.pw.Write(b)
}

func (c *Client) execResumable(ctx context.Context, cmd *Command) (ExitStatus, error) {
	id := make([]byte, 16)
	rand.Read(id)
	s := &rsession{c: c, cmd: cmd, id: hex.EncodeToString(id), r: *c.resume}
	if s.r.Window <= 0 {
		s.r.Window = DefaultResumeWindow
	}
	if s.r.Agent == "" {
		s.r.Agent = "cocoonbox-agent"
	}
	s.cond = sync.NewCond(&s.mu)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		s.mu.Lock()
		s.done = true
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	go s.readStdin()
	go s.control(ctx)
	defer s.commitStdin()
	backoff := 100 * time.Millisecond
	for n := 0; ; n++ {
		st, err := s.run(ctx, n)
		s.mu.Lock()
		exit, hello, fail := s.exit, s.hello, s.fail
		s.mu.Unlock()
		if exit != nil {
			return *exit, nil
		}
		var we *WriteError
		if errors.As(err, &we) {
			return ExitStatus{}, err
		}
		if ctx.Err() != nil {
			return ExitStatus{}, ctx.Err()
		}
		if fail != "" {
			s.mu.Lock()
			lostAt := s.lostAt
			s.mu.Unlock()
			if lostAt.IsZero() {
				return ExitStatus{}, fmt.Errorf("exec in %s: %s", cmd.Box, fail)
			}
			s.notify("gave up after %s: %s", since(lostAt), fail)
			return ExitStatus{}, fmt.Errorf("exec in %s: the connection was lost and %s", cmd.Box, fail)
		}
		var le *lostError
		transport := errors.As(err, &le) && le.code != codes.NotFound && le.code != codes.Unauthenticated &&
			le.code != codes.PermissionDenied && le.code != codes.InvalidArgument && le.code != codes.FailedPrecondition
		if n == 0 && !hello {
			if err == nil {
				// The agent ran and said nothing of ours: it cannot hold
				// sessions (missing, or too old). Today's plain Exec, once.
				s.notify("the box %s cannot keep a command across a lost connection (its cocoonbox-agent has no sessions); running it without", cmd.Box)
				return s.fallback(ctx, cancel)
			}
			if !transport {
				return st, err
			}
		} else if err != nil && !transport {
			return st, err
		}
		s.mu.Lock()
		lostAt := s.lostAt
		if lostAt.IsZero() {
			lostAt = time.Now()
			s.lostAt = lostAt
			backoff = 100 * time.Millisecond
		}
		s.mu.Unlock()
		if lostAt.Equal(s.lostAtSeen) {
			if n%10 == 0 {
				s.notify("connection to %s lost; reconnecting (%s)", cmd.Box, since(lostAt))
			}
		} else {
			s.lostAtSeen = lostAt
			s.notify("connection to %s lost; reconnecting", cmd.Box)
		}
		if time.Since(lostAt) > s.r.Window {
			s.notify("gave up after %s: the command in %s was ended", since(lostAt), cmd.Box)
			if err == nil {
				err = errors.New("the stream ended without an exit status")
			}
			return ExitStatus{}, fmt.Errorf("exec in %s: gave up on a lost connection after %s: %w", cmd.Box, since(lostAt), err)
		}
		select {
		case <-ctx.Done():
			return ExitStatus{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
		if c.raw != nil {
			c.raw.ResetConnectBackoff()
		}
	}
}

func since(t time.Time) string {
	d := time.Since(t)
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	return fmt.Sprintf("%d min", int(d.Minutes()))
}

func (s *rsession) notify(format string, args ...any) {
	if s.r.Notify != nil {
		fmt.Fprintf(s.r.Notify, "cocoonbox: "+format+"\n", args...)
	}
}

// run makes attempt n: the first opens the session, later ones attach to
// it (or open it again if the box never answered the first).
func (s *rsession) run(ctx context.Context, n int) (ExitStatus, error) {
	pr, pw := io.Pipe()
	a := &attempt{s: s, pr: pr, pw: pw, exited: make(chan struct{})}
	s.mu.Lock()
	hello := s.hello
	s.cur = a
	a.sent = s.inBase
	s.mu.Unlock()
	var line string
	sub := &Command{Box: s.cmd.Box, Stdin: pr, Stdout: a, Stderr: s.cmd.Stderr, Progress: s.cmd.Progress}
	if hello {
		line = s.r.Agent + " session attach " + s.id
	} else {
		line = s.r.Agent + " session open " + s.id + " " + s.r.Window.String() + " -- " + shellquote.Quote(s.cmd.Line)
		sub.Env, sub.Dir = s.cmd.Env, s.cmd.Dir
	}
	sub.Line = line
	if n == 0 {
		sub.Started = s.cmd.Started
	}
	if hello || n > 0 {
		s.mu.Lock()
		out := s.out
		s.mu.Unlock()
		a.prefix = sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Resume, Off: out[0], Off2: out[1]})
	}
	go a.pumpStdin()
	// The attempt's own context: after the exit it is not cancelled with
	// ctx, so that the bye reaches the box; a deliberate end (ctx done
	// before the exit) sends kill first.
	actx, acancel := context.WithCancel(context.WithoutCancel(ctx))
	type result struct {
		st  ExitStatus
		err error
	}
	res := make(chan result, 1)
	go func() {
		defer acancel()
		st, err := s.c.exec(actx, sub)
		// Nothing reads the pipe any more: writes blocked on it end.
		pr.CloseWithError(io.ErrClosedPipe)
		res <- result{st, err}
	}()
	var st ExitStatus
	var err error
	select {
	case r := <-res:
		st, err = r.st, r.err
	case <-a.exited:
		time.AfterFunc(10*time.Second, acancel)
	case <-ctx.Done():
		go a.write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Kill}))
		select {
		case <-res:
		case <-time.After(time.Second):
		}
		acancel()
		err = ctx.Err()
	}
	s.mu.Lock()
	a.dead = true
	if s.cur == a {
		s.cur = nil
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	select {
	case <-a.exited:
		// The stdin pipe ends behind the bye.
		go func() {
			a.wmu.Lock()
			pw.Close()
			a.wmu.Unlock()
		}()
	default:
		pw.CloseWithError(io.ErrClosedPipe)
		pr.Close()
	}
	return st, err
}

// readStdin reads the caller's stdin while what the box has not
// acknowledged is under the bound.
func (s *rsession) readStdin() {
	in := s.cmd.Stdin
	if in == nil {
		s.mu.Lock()
		s.inEOF = true
		s.cond.Broadcast()
		s.mu.Unlock()
		return
	}
	// From a regular file, read at an offset of our own: the file's moves
	// only once the box has answered (commitStdin), so that a start the box
	// refuses takes none of it, as in Exec.
	file, pos, peek := regularFile(in)
	if peek {
		s.mu.Lock()
		s.file, s.fileBase = file, pos
		s.mu.Unlock()
		in = io.NewSectionReader(file, pos, 1<<62)
	}
	buf := make([]byte, chunkSize)
	for {
		s.mu.Lock()
		for len(s.in) >= resumeStdinBound && !s.done {
			s.cond.Wait()
		}
		done := s.done
		s.mu.Unlock()
		if done {
			return
		}
		n, err := in.Read(buf)
		s.mu.Lock()
		s.in = append(s.in, buf[:n]...)
		s.inRead += uint64(n)
		if err != nil {
			s.inEOF = true
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// pumpStdin sends the attempt the stdin the box has not acknowledged,
// then what comes, then its end: each write takes all there is, so that
// a first chunk and its end go with the start.
func (a *attempt) pumpStdin() {
	s := a.s
	if a.prefix != nil {
		a.write(a.prefix)
	}
	var frame []byte
	for {
		s.mu.Lock()
		for !a.dead && a.sent >= s.inRead && !(s.inEOF && !a.eofSent) {
			s.cond.Wait()
		}
		if a.dead {
			s.mu.Unlock()
			return
		}
		a.sent = max(a.sent, s.inBase)
		frame = frame[:0]
		for a.sent < s.inRead && len(frame) < chunkSize {
			b := s.in[a.sent-s.inBase:]
			b = b[:min(len(b), chunkSize)]
			frame = sessionwire.AppendData(frame, sessionwire.Stdin, a.sent, b)
			a.sent += uint64(len(b))
		}
		if a.sent == s.inRead && s.inEOF && !a.eofSent {
			a.eofSent = true
			frame = sessionwire.Append(frame, sessionwire.Frame{Type: sessionwire.EOF, Stream: sessionwire.Stdin, Off: s.inRead})
		}
		s.mu.Unlock()
		a.write(frame)
	}
}

// control sends signals, resizes and the end of stdout to the current
// attempt; one that comes while none runs is dropped.
func (s *rsession) control(ctx context.Context) {
	signals, resizes, closed := s.cmd.Signals, s.cmd.Resizes, s.cmd.StdoutClosed
	for {
		var f sessionwire.Frame
		select {
		case <-ctx.Done():
			return
		case name, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			f = sessionwire.Frame{Type: sessionwire.Signal, Text: name}
		case sz, ok := <-resizes:
			if !ok {
				resizes = nil
				continue
			}
			f = sessionwire.Frame{Type: sessionwire.Resize, Rows: sz.Rows, Cols: sz.Cols}
		case <-closed:
			closed = nil
			s.dropStdout.Store(true)
			f = sessionwire.Frame{Type: sessionwire.CloseStdout}
		}
		s.send(sessionwire.Append(nil, f))
	}
}

// send writes b to the current attempt, if one runs.
func (s *rsession) send(b []byte) {
	s.mu.Lock()
	a := s.cur
	s.mu.Unlock()
	if a != nil {
		a.write(b)
	}
}

// writeWithin writes b, waiting at most d for it to go.
func (a *attempt) writeWithin(b []byte, d time.Duration) {
	done := make(chan struct{})
	go func() {
		a.write(b)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// Write takes the agent's stdout: frames.
func (a *attempt) Write(b []byte) (int, error) {
	if err := a.ps.Feed(b, a.frame); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (a *attempt) frame(f sessionwire.Frame) error {
	s := a.s
	switch f.Type {
	case sessionwire.Hello:
		s.mu.Lock()
		s.hello = true
		lostAt := s.lostAt
		s.lostAt = time.Time{}
		s.mu.Unlock()
		if !lostAt.IsZero() {
			s.notify("resumed after %s", since(lostAt))
		}
		s.ackStdin(f.Off)
	case sessionwire.Ack:
		if f.Stream == sessionwire.Stdin {
			s.ackStdin(f.Off)
		}
	case sessionwire.Data:
		if f.Stream != sessionwire.Stdout && f.Stream != sessionwire.Stderr {
			return nil
		}
		i := int(f.Stream) - 1
		s.mu.Lock()
		have := s.out[i]
		s.mu.Unlock()
		end := f.Off + uint64(len(f.Data))
		if end <= have {
			return nil
		}
		if f.Off > have {
			return fmt.Errorf("session: %d bytes of stream %d missing", f.Off-have, f.Stream)
		}
		w := s.cmd.Stdout
		if i == 1 {
			w = s.cmd.Stderr
		} else if s.dropStdout.Load() {
			w = nil
		}
		if err := write(w, f.Data[have-f.Off:]); err != nil {
			// A deliberate end (EPIPE on our stdout): the command ends now.
			a.writeWithin(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Kill}), time.Second)
			return err
		}
		s.mu.Lock()
		s.out[i] = end
		ack := end-s.acked[i] >= resumeAckEvery
		if ack {
			s.acked[i] = end
		}
		s.mu.Unlock()
		if ack {
			// Not on this goroutine: it is the stream's receiver, and a
			// stream that broke reads no more of the pipe until it has
			// seen the break.
			go a.write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Ack, Stream: f.Stream, Off: end}))
		}
	case sessionwire.Exit:
		s.mu.Lock()
		s.exit = &ExitStatus{Code: int(f.Code), Signal: f.Text, Error: f.Text2}
		s.mu.Unlock()
		// The bye goes; the agent's Exec ends behind it, unwaited for.
		go a.write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Bye}))
		close(a.exited)
	case sessionwire.Fail:
		s.mu.Lock()
		s.fail = f.Text
		s.mu.Unlock()
	}
	return nil
}

func (s *rsession) ackStdin(off uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if off <= s.inBase || off > s.inRead {
		return
	}
	s.in = s.in[off-s.inBase:]
	if len(s.in) == 0 {
		s.in = nil
	}
	s.inBase = off
	s.cond.Broadcast()
}

// commitStdin moves a regular file's offset past what was read of it, once
// the box has answered.
func (s *rsession) commitStdin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != nil && s.hello {
		s.file.Seek(s.fileBase+int64(s.inRead), io.SeekStart)
	}
}

// fallback runs the command as a plain Exec, its stdin what the session
// has read and not sent on, then what comes.
func (s *rsession) fallback(ctx context.Context, cancel context.CancelFunc) (ExitStatus, error) {
	cmd := *s.cmd
	if s.cmd.Stdin != nil {
		cmd.Stdin = sessionStdin{s}
	}
	cmd.Started = nil
	return s.c.exec(ctx, &cmd)
}

// sessionStdin reads a session's stdin buffer, taking what it reads.
type sessionStdin struct{ s *rsession }

func (r sessionStdin) Read(p []byte) (int, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.in) == 0 && !s.inEOF {
		s.cond.Wait()
	}
	if len(s.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.in)
	s.in = s.in[n:]
	s.inBase += uint64(n)
	s.cond.Broadcast()
	return n, nil
}
