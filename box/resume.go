package box

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	"github.com/cocoonbox/cocoonbox/internal/window"
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
	// TerminalWindow is Window for a command on a terminal; 0 means
	// DefaultTerminalWindow.
	TerminalWindow time.Duration
	// Notify, if not nil, gets one line when a stream is lost, while the
	// client reconnects, when it resumed or gave up, and when the box
	// cannot hold sessions (never the command's stdout).
	Notify io.Writer
	// Agent is the box's agent command, whose `session` verbs run the
	// box half; empty means cocoonbox-session where the box has it, else
	// cocoonbox-agent.
	Agent string
	// Prefix starts each Notify line, as the program's own messages
	// start ("cocoonbox-ssh: "); empty means "cocoonbox: ".
	Prefix string
	// Terminals makes only commands on a terminal resumable (what a user
	// who asked nothing gets: a shell outlives its stream, a script's
	// command starts as fast as a plain Exec); a box that cannot hold
	// sessions then runs them plainly without a line.
	Terminals bool
}

// WithResume makes the client's Execs resumable.
func WithResume(r Resume) DialOption {
	return func(o *dialOptions) { o.resume = &r }
}

// Bounds of what the client keeps: stdin sent and not acknowledged (past
// it stdin is not read), and how much output it takes before it
// acknowledges.
const (
	resumeStdinBound = window.Stream
	resumeAckEvery   = 256 << 10
)

// lostError is a stream that ended without the command's exit for a
// reason of the transport: the command may still run in the box.
type lostError struct {
	err  error
	code codes.Code
	// dial is set when the connection was never made (gRPC's "Error
	// while dialing"): nothing of the call reached the box.
	dial bool
}

func (e *lostError) Error() string { return e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// lost wraps a transport error of an Exec as a lostError; running says
// the command had started (wrapRunning).
func (c *Client) lost(op string, err error, running bool) error {
	wrapped := c.wrap(op, err)
	if running {
		wrapped = c.wrapRunning(op, err)
	}
	return &lostError{err: wrapped, code: status.Code(err),
		dial: status.Code(err) == codes.Unavailable && strings.Contains(status.Convert(err).Message(), "Error while dialing")}
}

// rsession is the client's side of one resumable command.
type rsession struct {
	c   *Client
	cmd *Command
	id  string
	r   Resume

	mu   sync.Mutex
	cond *sync.Cond
	// in holds stdin read and not acknowledged: its Base is the offset
	// the box acknowledged, its End how much was read; inEOF is set once
	// stdin ended.
	in    sessionwire.Ring
	inEOF bool
	// out is how much of stdout and stderr the caller has been given;
	// acked how much the box was told.
	out, acked [2]uint64
	// hello is set once the box's agent answered: the session exists;
	// opened once the box said it started the open (its hello may not
	// have come).
	hello, opened bool
	// lostAt is when the stream was lost, until the box answers again.
	lostAt time.Time
	// noteMu orders the lines of a loss (tellLost's) before the line of
	// the resume or the end, which sets over.
	noteMu sync.Mutex
	over   bool
	exit   *ExitStatus
	fail   string
	cur    *attempt
	// pendingCtl are signals that came while no attempt ran (for a box
	// that does not count them), and kills.
	pendingCtl []byte
	// sigs are the signals sent that the box has not counted
	// (sessionwire.Signals), each with the attempt it went on (nil:
	// none yet); sigBase is the box's count of those before them;
	// sigCounts is set once the box counts them.
	sigs      []sentSignal
	sigBase   uint64
	sigCounts bool
	// file is stdin when it is a regular file, read from fileBase on.
	file     *os.File
	fileBase int64
	// dropStdout is set once the caller reads no more stdout.
	dropStdout atomic.Bool
	// startOnce calls cmd.Started once.
	startOnce sync.Once
	// early is the agent's stderr until its hello.
	early earlyStderr
	done  bool
	// term is a terminal session's state (resume_tty.go); nil without a
	// terminal.
	term *termState
	// ending is set while abandon reaches the box to end the command.
	ending bool
}

// attempt is one Exec of the agent, carrying the session's frames: it is
// that Exec's stdin (Read: control frames first, then stdin's Data frames
// made from the ring in place) and its stdout (Write: frames from the
// box). Its fields but ps are guarded by s.mu.
type attempt struct {
	s      *rsession
	exited chan struct{}
	// ctl is control frames to go before any more data (the Resume of
	// an attach first).
	ctl     []byte
	sent    uint64
	eofSent bool
	// dead is set once the attempt's Exec returned; end once the bye is
	// queued: its stdin ends behind it.
	dead, end bool
	ps        sessionwire.Parser
	// sigSynced is set once the box said how many signals it has taken
	// on this attempt: those sent on an earlier one and not counted went
	// again then.
	sigSynced bool
}

// sentSignal is a Signal frame and the attempt it was last sent on.
type sentSignal struct {
	frame []byte
	on    *attempt
}

// write queues control frames b on the attempt's stdin.
func (a *attempt) write(b []byte) {
	s := a.s
	s.mu.Lock()
	a.ctl = append(a.ctl, b...)
	s.cond.Broadcast()
	s.mu.Unlock()
}

// flushWithin waits at most d for the queued control frames to be taken
// by the Exec.
func (a *attempt) flushWithin(d time.Duration) {
	s := a.s
	t := time.AfterFunc(d, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer t.Stop()
	deadline := time.Now().Add(d)
	s.mu.Lock()
	for len(a.ctl) > 0 && !a.dead && time.Now().Before(deadline) {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// dataHeader is the size of a Data frame's header.
const dataHeader = 14

// Read gives the Exec the attempt's next frames: queued control frames,
// else a Data frame of the stdin the box has not acknowledged (one whole
// frame per call, its bytes copied once, from the ring), else stdin's EOF
// frame; io.EOF once the bye went, an error once the attempt is over.
func (a *attempt) Read(p []byte) (int, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if len(a.ctl) > 0 {
			n := copy(p, a.ctl)
			a.ctl = a.ctl[n:]
			if len(a.ctl) == 0 {
				a.ctl = nil
				s.cond.Broadcast()
				// Stdin that waits goes in the same read: an attach's
				// first message, sent with the start before the box
				// answers, then carries the resume and the stdin the box
				// lacks, with no round trip between them.
				if rest := p[n:]; len(rest) >= 4*dataHeader && !a.end && !a.dead && a.unsent() {
					n += len(a.frames(rest))
				}
			}
			return n, nil
		}
		if a.end {
			return 0, io.EOF
		}
		if a.dead {
			return 0, io.ErrClosedPipe
		}
		if a.unsent() {
			if len(p) < 4*dataHeader {
				// Too small for a frame: staged in ctl, taken piecewise.
				a.ctl = a.frames(make([]byte, 4096+2*dataHeader))
				continue
			}
			return len(a.frames(p)), nil
		}
		s.cond.Wait()
	}
}

// lend is Read without the copy (stdinLender): a Data frame's header,
// then its payload where it stands in the ring, which keeps it unchanged
// until the box acknowledges it, and the box does only once it came
// through a stream (bytes it had from an earlier stream it skips).
func (a *attempt) lend(limit int) ([][]byte, error) {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if len(a.ctl) > 0 {
			n := min(len(a.ctl), limit)
			b := bytes.Clone(a.ctl[:n])
			a.ctl = a.ctl[n:]
			if len(a.ctl) == 0 {
				a.ctl = nil
				s.cond.Broadcast()
			}
			return [][]byte{b}, nil
		}
		if a.end {
			return nil, io.EOF
		}
		if a.dead {
			return nil, io.ErrClosedPipe
		}
		a.sent = max(a.sent, s.in.Base())
		if a.sent < s.in.End() || s.inEOF && !a.eofSent {
			var parts [][]byte
			if a.sent < s.in.End() {
				d := s.in.Peek(a.sent, limit-2*dataHeader)
				parts = append(parts, sessionwire.AppendDataHeader(make([]byte, 0, dataHeader), sessionwire.Stdin, a.sent, len(d)), d)
				a.sent += uint64(len(d))
			}
			if a.sent == s.in.End() && s.inEOF && !a.eofSent {
				a.eofSent = true
				parts = append(parts, sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.EOF, Stream: sessionwire.Stdin, Off: s.in.End()}))
			}
			return parts, nil
		}
		s.cond.Wait()
	}
}

// unsent reports whether stdin has bytes or its EOF the attempt has
// not sent. s.mu is held.
func (a *attempt) unsent() bool {
	s := a.s
	a.sent = max(a.sent, s.in.Base())
	return a.sent < s.in.End() || s.inEOF && !a.eofSent
}

// frames fills p (at least 2 headers long) with a Data frame of what is
// unsent, and stdin's EOF frame after it when all went; it returns the
// filled part. s.mu is held.
func (a *attempt) frames(p []byte) []byte {
	s := a.s
	out := p[:0]
	if a.sent < s.in.End() {
		d := s.in.Peek(a.sent, len(p)-2*dataHeader)
		out = sessionwire.AppendDataHeader(out, sessionwire.Stdin, a.sent, len(d))
		out = append(out, d...)
		a.sent += uint64(len(d))
	}
	if a.sent == s.in.End() && s.inEOF && !a.eofSent {
		a.eofSent = true
		out = sessionwire.Append(out, sessionwire.Frame{Type: sessionwire.EOF, Stream: sessionwire.Stdin, Off: s.in.End()})
	}
	return out
}

func (c *Client) execResumable(ctx context.Context, cmd *Command) (ExitStatus, error) {
	id := make([]byte, 16)
	rand.Read(id)
	s := &rsession{c: c, cmd: cmd, id: hex.EncodeToString(id)}
	if c.resume != nil {
		s.r = *c.resume
	}
	s.in.Limit = resumeStdinBound
	if s.r.Window <= 0 {
		s.r.Window = DefaultResumeWindow
	}
	s.cond = sync.NewCond(&s.mu)
	if cmd.TTY != nil || cmd.Attach != "" {
		s.startTerm()
	}
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
	// What the box said before a hello that never came is the caller's,
	// but for the fallback, whose one line names it.
	fellBack := false
	defer func() {
		if !fellBack {
			s.early.pass(cmd.Stderr)
		}
	}()
	backoff := 100 * time.Millisecond
	var prevLoss time.Time
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
		if err := s.adoptFailed(st, err); err != nil {
			return ExitStatus{}, err
		}
		if errors.Is(err, ErrDetached) {
			return ExitStatus{}, s.detached()
		}
		if ctx.Err() != nil {
			s.abandon(ctx, n)
			return ExitStatus{}, ctx.Err()
		}
		if fail != "" {
			s.mu.Lock()
			lostAt := s.lostAt
			s.mu.Unlock()
			if lostAt.IsZero() {
				return ExitStatus{}, fmt.Errorf("exec in %s: %s", cmd.Box, fail)
			}
			s.notifyEnd("gave up after %s: %s", since(lostAt), fail)
			return ExitStatus{}, fmt.Errorf("exec in %s: the connection was lost and %s", cmd.Box, fail)
		}
		var le *lostError
		transport := errors.As(err, &le) && le.code != codes.NotFound && le.code != codes.Unauthenticated &&
			le.code != codes.PermissionDenied && le.code != codes.InvalidArgument && le.code != codes.FailedPrecondition
		if n == 0 && !hello {
			if err == nil {
				// The agent ran and said nothing of ours: it cannot hold
				// sessions (missing, or too old). Today's plain Exec, once.
				if !s.r.Terminals {
					s.notify("the box %s cannot keep a command across a lost connection (its cocoonbox-agent has no sessions%s); running it without", cmd.Box, s.early.said())
				}
				fellBack = true
				return s.fallback(ctx, cancel)
			}
			// A first call that never reached the box (no local box, no
			// network) started nothing to resume: it fails at once, as
			// ssh does when it cannot connect.
			if !transport || le.dial {
				return st, err
			}
		} else if err != nil && !transport {
			return st, err
		}
		s.mu.Lock()
		lostAt := s.lostAt
		again := !lostAt.IsZero()
		// A stream that the box ended within a second of the last loss
		// counts as the same trouble: its attach is paced too.
		flaps := !again && time.Since(prevLoss) < time.Second
		if !again {
			lostAt = time.Now()
			s.lostAt = lostAt
			prevLoss = lostAt
			if !flaps {
				backoff = 100 * time.Millisecond
			}
		}
		s.mu.Unlock()
		if !again {
			s.notify("connection to %s lost; reconnecting", cmd.Box)
			go s.tellLost(ctx, lostAt)
		}
		if time.Since(lostAt) > s.r.Window {
			s.notifyEnd("gave up after %s: the command in %s was ended", since(lostAt), cmd.Box)
			if err == nil {
				err = errors.New("the stream ended without an exit status")
			}
			return ExitStatus{}, fmt.Errorf("exec in %s: gave up on a lost connection after %s: %w", cmd.Box, since(lostAt), err)
		}
		// The attach after a loss goes at once and waits for the link
		// (run). One that failed again, with the link back (a box that
		// ends each stream, a master that was still going), waits a
		// backoff before the next.
		if again || flaps {
			if err := pause(ctx, backoff); err != nil {
				s.abandon(ctx, n)
				return ExitStatus{}, err
			}
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

// tellLost writes the reconnecting line again, with the time since the
// loss at lostAt, every second on a terminal (in place) and every 10 s
// otherwise, until the box answers or the session ends.
func (s *rsession) tellLost(ctx context.Context, lostAt time.Time) {
	every := 10 * time.Second
	if s.term != nil {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.noteMu.Lock()
		s.mu.Lock()
		still := s.lostAt.Equal(lostAt) && !s.over
		s.mu.Unlock()
		if still {
			s.notify("connection to %s lost; reconnecting (%s)", s.cmd.Box, since(lostAt))
		}
		s.noteMu.Unlock()
		if !still {
			return
		}
	}
}

// notifyEnd is notify for the session's last line: no reconnecting line
// comes after it.
func (s *rsession) notifyEnd(format string, args ...any) {
	s.noteMu.Lock()
	defer s.noteMu.Unlock()
	s.mu.Lock()
	s.over = true
	s.mu.Unlock()
	s.notify(format, args...)
}

// pause waits d, or less if ctx ends first (its error then).
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// abandonWithin bounds how long a deliberate end that finds the stream
// lost tries to reach the box again to end the command there.
const abandonWithin = 3 * time.Second

// abandon makes a deliberate end (ctx cancelled, not ErrDetached) that
// came while the stream was lost, or before the box answered the kill,
// end the command in the box now rather than when the window closes:
// it attaches again, the kill first (also when the box started the open
// and its hello was lost), until the box sends the exit or says the
// session is not there, or abandonWithin has passed, and says so when
// it could not. n is the last attempt made.
func (s *rsession) abandon(ctx context.Context, n int) {
	if context.Cause(ctx) == ErrDetached {
		return
	}
	s.mu.Lock()
	need := (s.hello || s.opened) && s.exit == nil && s.fail == ""
	s.ending = true
	s.mu.Unlock()
	if !need {
		return
	}
	deadline := time.Now().Add(abandonWithin)
	actx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	kill := sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Kill})
	for actx.Err() == nil {
		n++
		s.mu.Lock()
		s.pendingCtl = append(s.pendingCtl, kill...)
		s.mu.Unlock()
		s.run(actx, n)
		s.mu.Lock()
		over := s.exit != nil || s.fail != ""
		s.mu.Unlock()
		if over {
			return
		}
		pause(actx, 100*time.Millisecond)
	}
	s.notifyEnd("could not reach %s to end the command: it ends when the resume window closes (%s after the connection was lost)", s.cmd.Box, s.r.Window)
}

func since(t time.Time) string {
	d := time.Since(t)
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	return fmt.Sprintf("%d min", int(d.Minutes()))
}

// noticeRE matches the lines notify writes while a session goes on (a
// loss, a resume, a fallback to a plain Exec), not those on giving up.
var noticeRE = regexp.MustCompile(`^(connection to \S+ lost; reconnecting( \(\d+ (s|min)\))?|resumed after \d+ (s|min)|the box \S+ cannot keep a command across a lost connection \(.*\); running it without)$`)

// IsNotice reports whether line, without its program's prefix
// (Resume.Prefix), is one of the notices a resumable session writes on
// its way: "connection to BOX lost; reconnecting", "resumed after N s",
// a fallback to a plain command. Such a line never says why a command
// failed, so a caller that shows a tool's remote shell's last line as the
// cause skips it.
func IsNotice(line string) bool { return noticeRE.MatchString(line) }

func (s *rsession) notify(format string, args ...any) {
	if s.term != nil && s.cmd.StatusLine != nil {
		s.termNotify(fmt.Sprintf(format, args...))
		return
	}
	if s.r.Notify != nil {
		p := s.r.Prefix
		if p == "" {
			p = "cocoonbox: "
		}
		fmt.Fprintf(s.r.Notify, p+format+"\n", args...)
	}
}

// run makes attempt n: the first opens the session, later ones attach to
// it (or open it again if the box never answered the first).
func (s *rsession) run(ctx context.Context, n int) (ExitStatus, error) {
	a := &attempt{s: s, exited: make(chan struct{})}
	s.mu.Lock()
	// An end that reaches the box again attaches, hello or not: an open
	// now would start the command again.
	hello := s.hello || s.ending
	a.sent = s.in.Base()
	s.mu.Unlock()
	var line string
	sub := &Command{Box: s.cmd.Box, Stdin: a, Stdout: a, Stderr: s.cmd.Stderr, Progress: s.cmd.Progress}
	if s.term != nil {
		line = s.termLine(hello)
		if !hello {
			sub.Env, sub.Dir = s.termEnv(), s.cmd.Dir
		}
	} else if hello {
		line = s.agentLine("attach " + s.id)
	} else {
		line = s.openLine()
		sub.Env, sub.Dir = s.cmd.Env, s.cmd.Dir
	}
	sub.Line = line
	// After the first, an attempt waits for the link rather than fail
	// while it is down: it goes the moment the connection is back
	// (through a master, once the master, which ends with its link, is
	// gone and the client dials itself: share's masterConn).
	sub.waitLink = n > 0
	var started atomic.Bool
	sub.Started = func() {
		started.Store(true)
		s.mu.Lock()
		s.opened = true
		s.mu.Unlock()
		// Once, on the first attempt that starts: a first one lost before
		// the box answered must not leave a caller that reads stdin only
		// after it (git's helper) waiting for ever.
		if s.cmd.Started != nil {
			s.startOnce.Do(s.cmd.Started)
		}
	}
	if !hello {
		// Until the box half answers, what the box's shell says is kept:
		// the one line of a box that cannot hold sessions names it.
		sub.Stderr = &s.early
	}
	if hello || n > 0 {
		s.mu.Lock()
		out := s.out
		s.mu.Unlock()
		a.ctl = sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Resume, Off: out[0], Off2: out[1]})
		if s.term != nil {
			a.ctl = s.termNudge(a.ctl)
		}
	}
	s.mu.Lock()
	s.cur = a
	// Signals that came while no attempt ran go first, for a box that
	// does not count them; one that does gets those it lacks once it
	// said its count (syncSignals).
	a.ctl, s.pendingCtl = append(a.ctl, s.pendingCtl...), nil
	if !s.sigCounts {
		for i := range s.sigs {
			if s.sigs[i].on == nil {
				s.sigs[i].on = a
			}
		}
	}
	s.mu.Unlock()
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
		res <- result{st, err}
	}()
	if sub.waitLink {
		// Not past the window: an attempt still waiting for the link
		// then is ended, and the loop gives up.
		s.mu.Lock()
		lostAt := s.lostAt
		s.mu.Unlock()
		if !lostAt.IsZero() {
			t := time.AfterFunc(time.Until(lostAt.Add(s.r.Window)), func() {
				if !started.Load() {
					acancel()
				}
			})
			defer t.Stop()
		}
	}
	var st ExitStatus
	var err error
	select {
	case r := <-res:
		st, err = r.st, r.err
	case <-a.exited:
		time.AfterFunc(10*time.Second, acancel)
	case <-ctx.Done():
		if context.Cause(ctx) == ErrDetached {
			// The box keeps the command for its window.
			acancel()
			err = ErrDetached
			break
		}
		a.write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Kill}))
		if started.Load() || !sub.waitLink {
			select {
			case <-res:
			case <-time.After(time.Second):
			}
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
	return st, err
}

// agentLine is the command line of the box half with args (words for
// the shell): Resume.Agent's `session` verb when it is set, else the lean
// cocoonbox-session where the box has it (it starts in a few ms, against
// the agent's 15 to 25) and cocoonbox-agent's otherwise, chosen by the
// box's shell with no round trip.
func (s *rsession) agentLine(args string) string {
	if s.r.Agent != "" {
		return s.r.Agent + " session " + args
	}
	return "set -- " + args + `; command -v cocoonbox-session >/dev/null && exec cocoonbox-session "$@"; exec cocoonbox-agent session "$@"`
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
	if !s.waitAdopt() {
		return
	}
	file, pos, peek := regularFile(in)
	if peek {
		s.mu.Lock()
		s.file, s.fileBase = file, pos
		s.mu.Unlock()
		in = io.NewSectionReader(file, pos, 1<<62)
	}
	for {
		s.mu.Lock()
		var sp []byte
		for !s.done {
			if sp = s.in.Space(); sp != nil {
				break
			}
			s.cond.Wait()
		}
		done := s.done
		s.mu.Unlock()
		if done {
			return
		}
		// Into the ring in place: only readStdin adds to it, and what the
		// box has not acknowledged is not in Space's room.
		n, err := in.Read(sp[:min(len(sp), chunkSize)])
		s.mu.Lock()
		s.in.Commit(n)
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
			if s.term != nil {
				s.mu.Lock()
				s.term.size = sz
				s.mu.Unlock()
			}
		case <-closed:
			closed = nil
			s.dropStdout.Store(true)
			f = sessionwire.Frame{Type: sessionwire.CloseStdout}
		}
		s.send(sessionwire.Append(nil, f))
	}
}

// send writes b to the current attempt, if one runs; else a signal waits
// for the next attempt (a terminal's size is sent again at the resume).
// A signal is kept until the box has counted it, to go again on the
// next attempt if this one is lost first.
func (s *rsession) send(b []byte) {
	s.mu.Lock()
	a := s.cur
	if b[0] == sessionwire.Signal {
		if s.sigCounts && a != nil && !a.sigSynced {
			// Behind those syncSignals will send again, in order.
			a = nil
		}
		s.sigs = append(s.sigs, sentSignal{frame: b, on: a})
		if s.cur == nil && !s.sigCounts {
			s.pendingCtl = append(s.pendingCtl, b...)
		}
	}
	s.mu.Unlock()
	if a != nil {
		a.write(b)
	}
}

// syncSignals takes the box's count of the signals it has taken (n, on
// attempt a): those are forgotten, and at the first count of an attempt
// those sent on an earlier one (or on none) go again on it, once each.
func (s *rsession) syncSignals(a *attempt, n uint64) {
	s.mu.Lock()
	if !s.sigCounts && len(s.sigs) == 0 {
		// A client that took the session back starts from the box's count.
		s.sigBase = n
	}
	s.sigCounts = true
	if n > s.sigBase {
		k := min(n-s.sigBase, uint64(len(s.sigs)))
		s.sigs = s.sigs[k:]
		s.sigBase += k
	}
	var again []byte
	if !a.sigSynced {
		a.sigSynced = true
		for i := range s.sigs {
			if s.sigs[i].on != a {
				again = append(again, s.sigs[i].frame...)
				s.sigs[i].on = a
			}
		}
	}
	s.mu.Unlock()
	if again != nil {
		a.write(again)
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
		if err := s.early.pass(s.cmd.Stderr); err != nil {
			return err
		}
		s.noteMu.Lock()
		defer s.noteMu.Unlock()
		s.mu.Lock()
		s.hello = true
		lostAt, ending := s.lostAt, s.ending
		s.lostAt = time.Time{}
		adopt := s.term != nil && s.term.adopt && !s.term.taken
		if adopt {
			// A client taking a session back starts its stdin where the
			// command's stands.
			s.in.Reset(f.Off)
		}
		s.mu.Unlock()
		if s.term != nil {
			s.termResumed(lostAt)
		} else if !lostAt.IsZero() && !ending {
			s.notify("resumed after %s", since(lostAt))
		}
		s.ackStdin(f.Off)
	case sessionwire.Ack:
		switch f.Stream {
		case sessionwire.Stdin:
			s.ackStdin(f.Off)
		case sessionwire.Signals:
			s.syncSignals(a, f.Off)
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
		if f.Off > have && s.term != nil && s.term.adopt && have == 0 {
			// Taken back by a new client: the output starts where the
			// box's acknowledged offset is.
			have = f.Off
		} else if f.Off > have {
			return fmt.Errorf("session: %d bytes of stream %d missing", f.Off-have, f.Stream)
		}
		w := s.cmd.Stdout
		if i == 1 {
			w = s.cmd.Stderr
		} else if s.dropStdout.Load() {
			w = nil
		}
		if err := write(w, f.Data[have-f.Off:]); err != nil {
			// A deliberate end (EPIPE on our stdout, also a terminal
			// command's when that is a pipe whose reader went: rsh -t
			// main yes | head -1): the command ends now, as ssh's does.
			// A terminal that fails otherwise has gone (closed, its
			// connection dead, --stdio's ssh gone, which writes to no
			// file of ours): its session stays, as after a hangup.
			if _, file := w.(*os.File); s.term == nil || file && errors.Is(err, syscall.EPIPE) {
				a.write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Kill}))
				a.flushWithin(time.Second)
			}
			return err
		}
		s.mu.Lock()
		s.out[i] = end
		// A terminal's output is acknowledged as soon as it is shown: a
		// client that takes the session back gets what was not.
		ack := end-s.acked[i] >= resumeAckEvery || s.term != nil
		if ack {
			s.acked[i] = end
		}
		s.mu.Unlock()
		if ack {
			a.write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Ack, Stream: f.Stream, Off: end}))
		}
	case sessionwire.Exit:
		// The bye goes, and the agent's stdin ends behind it; its Exec
		// ends unwaited for. A second exit on the stream (a box's
		// fault) changes nothing: the first stands.
		select {
		case <-a.exited:
			return nil
		default:
		}
		s.mu.Lock()
		s.exit = &ExitStatus{Code: int(f.Code), Signal: f.Text, Error: f.Text2}
		a.ctl = sessionwire.Append(a.ctl, sessionwire.Frame{Type: sessionwire.Bye})
		a.end = true
		s.cond.Broadcast()
		s.mu.Unlock()
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
	if off <= s.in.Base() || off > s.in.End() {
		return
	}
	s.in.Drop(off)
	s.cond.Broadcast()
}

// commitStdin moves a regular file's offset past what was read of it, once
// the box has answered.
func (s *rsession) commitStdin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != nil && s.hello {
		s.file.Seek(s.fileBase+int64(s.in.End()), io.SeekStart)
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
	for s.in.Len() == 0 && !s.inEOF {
		s.cond.Wait()
	}
	if s.in.Len() == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.in.Peek(s.in.Base(), len(p)))
	s.in.Drop(s.in.Base() + uint64(n))
	s.cond.Broadcast()
	return n, nil
}

// earlyStderr is the box half's stderr until its hello: kept (its first
// 4 KiB) while it may be a box's shell that has no session verbs, then
// passed on to the command's stderr.
type earlyStderr struct {
	mu     sync.Mutex
	buf    []byte
	passed bool
	w      io.Writer
}

func (e *earlyStderr) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.passed {
		if err := write(e.w, p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	e.buf = append(e.buf, p[:min(len(p), max(0, 4<<10-len(e.buf)))]...)
	return len(p), nil
}

// pass writes what was kept to w, and from then on all that comes.
func (e *earlyStderr) pass(w io.Writer) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.passed {
		return nil
	}
	e.passed, e.w = true, w
	b := e.buf
	e.buf = nil
	return write(w, b)
}

// said is the first line kept, as ": LINE", or "".
func (e *earlyStderr) said() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	line, _, _ := strings.Cut(strings.TrimSpace(string(e.buf)), "\n")
	if line == "" {
		return ""
	}
	return ": " + printable.Line(line, 200)
}
