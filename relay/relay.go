// Package relay carries a byte stream to HOST:PORT (or a unix socket,
// DialUnix) as seen from inside a box, over one Session.Exec: the laptop
// half is Dial, the box half is Serve (run as `cocoonbox-agent relay`),
// with python3 and bash's /dev/tcp as fallbacks for a box whose agent
// lacks the verb (docs/ssh-config.md, "Port forwarding").
//
// The wire is the Exec's own streams: stdin carries bytes to the target,
// stdout bytes from it, close_stdin is the half-close toward the target.
// The box half writes one Ready byte on stdout once connected and nothing
// before, so a connect failure is an exit status and a stderr line, never
// bytes of the stream.
package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// Ready is the byte the box half writes on stdout once it is connected,
// before any byte of the stream (ASCII ACK).
const Ready = 0x06

// EOFEnv is set to "1" in the environment of the box half's Exec by a
// laptop half that reads its eof line: the target's EOF is then "eof N"
// alone on the box half's stderr (N the bytes of stdout before it, Ready
// included), and the box half goes on carrying stdin to the target until
// stdin's EOF, so that either end may half-close and still hear back. A
// box half that knows no such variable ends at the target's EOF, as an
// Exec's stdout has no EOF but its end.
const EOFEnv = "COCOONBOX_RELAY_EOF"

// eofPrefix starts the eof line.
const eofPrefix = "eof "

// Exit statuses of the box half.
const (
	// ExitConnect: the connection to HOST:PORT could not be made; one line
	// on stderr says why.
	ExitConnect = 3
	// ExitNoRelay: the box has neither an agent with the relay verb nor
	// python3 nor bash.
	ExitNoRelay = 5
)

// Conn is a forwarded connection. Read returns io.EOF once the target has
// closed its side and everything it sent was read; CloseWrite is the
// half-close toward the target (TCP shutdown of its write side there);
// Close ends both directions at once.
type Conn interface {
	io.ReadWriteCloser
	// CloseWrite closes the stream toward the target; reads go on.
	CloseWrite() error
}

// DialError is a connection the box could not make: HOST:PORT refused,
// unreachable or unresolvable from inside the box; or, with Listen set,
// an address it could not listen on (in use, not the box's).
type DialError struct {
	Box, Addr string
	// Reason is the box half's one stderr line.
	Reason string
	// Listen says the box could not listen on Addr, rather than connect.
	Listen bool
}

func (e *DialError) Error() string {
	op := "connect to"
	if e.Listen {
		op = "listen on"
	}
	return fmt.Sprintf("%s %s in box %s: %s", op, e.Addr, e.Box, e.Reason)
}

// ErrNoRelay is returned, wrapped, when the box has no relay at all.
var ErrNoRelay = errors.New("the box has no relay (cocoonbox-agent relay, python3 or bash)")

// hostRE is what a host may be: a DNS name, an IPv4 or an IPv6 literal
// (with a zone), nothing a shell or bash's /dev/tcp path could misread.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9_.:%][A-Za-z0-9_.:%-]*$`)

// CheckTarget reports whether host and port may be relayed: a host of
// letters, digits and ._:%- (not starting with -), at most 255 bytes, and
// a port from 1 to 65535.
func CheckTarget(host string, port uint32) error {
	if host == "" || len(host) > 255 || !hostRE.MatchString(host) {
		return fmt.Errorf("bad host %q: want a host name or an IP address", host)
	}
	if port == 0 || port > 65535 {
		return fmt.Errorf("bad port %d: want 1 to 65535", port)
	}
	return nil
}

// Dial connects to host:port from inside boxName with one Exec of the
// relay in the box. It returns once the box half is connected; a
// connection the box could not make is a *DialError, a box with no relay
// wraps ErrNoRelay. ctx bounds only the dial, as net.Dialer's does; the
// returned Conn lives until Close or the end of the stream.
//
// The first try runs the box's agent alone (one process); a box whose
// agent lacks the verb, or that has none, is remembered, and it and later
// dials run Command's fallbacks instead.
func Dial(ctx context.Context, c *box.Client, boxName, host string, port uint32) (Conn, error) {
	if err := CheckTarget(host, port); err != nil {
		return nil, err
	}
	key := fallbackKey{c, boxName}
	if _, ok := needsFallback.Load(key); !ok {
		rc, err := dial(ctx, c, boxName, host, port, true)
		if !errors.Is(err, errNoAgent) {
			return rc, err
		}
		needsFallback.Store(key, true)
	}
	return dial(ctx, c, boxName, host, port, false)
}

// needsFallback holds the fallbackKeys of the boxes whose agent has no
// relay verb.
var needsFallback sync.Map

type fallbackKey struct {
	c   *box.Client
	box string
}

// errNoAgent is an agent-only dial that found no agent with the verb.
var errNoAgent = errors.New("relay: the box's agent has no relay verb")

// agentCommand runs the box's agent alone: an older agent answers with
// its usage JSON line, a box without one with the shell's 127.
func agentCommand(host string, port uint32) string {
	return "exec cocoonbox-agent relay --ready -- " + shellquote.Quote(host) + " " + strconv.FormatUint(uint64(port), 10)
}

// CheckSocket reports whether path may be relayed as a unix socket's: not
// empty, at most 104 bytes (sun_path's room on macOS; Linux has 108), no
// NUL and no newline.
func CheckSocket(path string) error {
	if path == "" || len(path) > 104 || strings.ContainsAny(path, "\x00\n") {
		return fmt.Errorf("bad unix socket path %q: want a path of at most 104 bytes", path)
	}
	return nil
}

// DialUnix connects to the unix socket at path inside boxName (relative:
// from the workspace) with one Exec of UnixCommand, as Dial does to a TCP
// port, with the same errors: a socket the box could not connect to is a
// *DialError naming path.
func DialUnix(ctx context.Context, c *box.Client, boxName, path string) (Conn, error) {
	if err := CheckSocket(path); err != nil {
		return nil, err
	}
	return dialLine(ctx, c, boxName, path, UnixCommand(path), false)
}

func dial(ctx context.Context, c *box.Client, boxName, host string, port uint32, agentOnly bool) (Conn, error) {
	line := Command(host, port)
	if agentOnly {
		line = agentCommand(host, port)
	}
	return dialLine(ctx, c, boxName, joinHostPort(host, port), line, agentOnly)
}

// dialLine runs line, a relay to addr, in boxName and returns once it is
// connected; agentOnly says line is the agent alone (errNoAgent when it
// has no relay verb).
func dialLine(ctx context.Context, c *box.Client, boxName, addr, line string, agentOnly bool) (Conn, error) {
	p := startExec(ctx, c, boxName, line, true, nil, func(st box.ExitStatus, stderrLine string) error {
		switch {
		case agentOnly && st.Code == 127:
			return errNoAgent
		case st.Code == 0 && st.Signal == "" && st.Error == "":
			return nil
		}
		return statusError(boxName, addr, st, stderrLine)
	})
	rc := &conn{r: p.stdout, w: p.stdin, cancel: p.cancel, done: p.done}
	defer cancelOn(ctx, p.cancel)()
	var b [1]byte
	_, err := io.ReadFull(p.stdout, b[:])
	switch {
	case err == nil && b[0] != Ready && agentOnly:
		// An older agent's usage line.
		err = errNoAgent
	case err == nil && b[0] != Ready:
		err = fmt.Errorf("relay to %s in box %s: the box answered %q before connecting, not the ready byte", addr, boxName, b[0])
	}
	if err != nil {
		rc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("relay to %s in box %s: it ended before connecting", addr, boxName)
		}
		return nil, err
	}
	return rc, nil
}

// execPipes is a box command whose stdin and stdout are pipes.
type execPipes struct {
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	// cancel ends the Exec; done is closed once it has ended, and err is
	// then why (nil: exit 0), which stdout's reader also gets after the
	// last byte.
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// startExec runs line in boxName until its end or cancel: ctx's values
// go with it, not its end. How it ended becomes an error with status (the
// exit status and the last line of stderr; nil for success), unless the
// Exec itself failed. With eof, the box half is asked for its eof line
// (EOFEnv), which ends stdout's reads once the bytes before it are read.
// progress is box.Command's.
func startExec(ctx context.Context, c *box.Client, boxName, line string, eof bool, progress io.Writer, status func(st box.ExitStatus, stderrLine string) error) *execPipes {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	p := &execPipes{stdin: stdinW, stdout: stdoutR, cancel: cancel, done: make(chan struct{})}
	go func() {
		var stderr limitedBuffer
		cmd := &box.Command{
			Box:      boxName,
			Line:     line,
			Stdin:    stdinR,
			Stdout:   stdoutW,
			Stderr:   &stderr,
			Progress: progress,
		}
		var lines eofLines
		if eof {
			lines.t = &eofTracker{w: stdoutW, at: -1, stderr: &stderr}
			cmd.Env = map[string]string{EOFEnv: "1"}
			cmd.Stdout, cmd.Stderr = lines.t, lines
		}
		st, err := c.Exec(ctx, cmd)
		if eof {
			// A last line without its newline.
			lines.Write([]byte{'\n'})
		}
		// Writers blocked on a stream that has ended must not wait forever.
		stdinR.CloseWithError(errEnded)
		if err == nil {
			err = status(st, stderr.lastLine())
		}
		p.err = err
		stdoutW.CloseWithError(err)
		close(p.done)
	}()
	return p
}

// cancelOn calls cancel if ctx ends before the returned stop is called:
// ctx bounds a start, not the Exec's life.
func cancelOn(ctx context.Context, cancel context.CancelFunc) (stop func()) {
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-stopped:
		}
	}()
	return func() { close(stopped) }
}

var errEnded = errors.New("relay: the connection has ended")

func statusError(boxName, addr string, st box.ExitStatus, line string) error {
	switch {
	case st.Signal != "" || st.Error != "":
		return fmt.Errorf("relay to %s in box %s: %s", addr, boxName, st.Text())
	case st.Code == ExitConnect:
		return &DialError{Box: boxName, Addr: addr, Reason: connectReason(line)}
	case st.Code == ExitNoRelay:
		return fmt.Errorf("box %s: %w", boxName, ErrNoRelay)
	}
	if line == "" {
		line = st.Text()
	}
	return fmt.Errorf("relay to %s in box %s: %s", addr, boxName, line)
}

// connectReason is the reason in the box half's line, without the
// program's name and the "connect HOST:PORT: " every half starts it with.
func connectReason(line string) string { return boxReason(line, "connect ", "connection failed") }

// boxReason is the reason in the box half's stderr line, without the
// program's name and the "VERB ADDR: " (verb "connect " or "listen ")
// it starts with; def when it says nothing.
func boxReason(line, verb, def string) string {
	line = strings.TrimPrefix(line, "cocoonbox-agent: ")
	if rest, ok := strings.CutPrefix(line, verb); ok {
		if i := strings.Index(rest, ": "); i >= 0 {
			line = rest[i+2:]
		}
	}
	if line == "" {
		return def
	}
	return line
}

// conn is the laptop end: reads come from the Exec's stdout pipe, writes
// go to its stdin pipe, each pipe handing bytes over only as fast as the
// other side takes them (the backpressure of gRPC's flow control).
type conn struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	// wroteEOF is set once CloseWrite was called.
	wroteEOF atomic.Bool
}

func (c *conn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *conn) Write(p []byte) (int, error) { return c.w.Write(p) }

// CloseWrite sends close_stdin once the bytes written before it are sent.
func (c *conn) CloseWrite() error {
	c.wroteEOF.Store(true)
	return c.w.Close()
}

// drainGrace is how long Close lets a box half that was sent EOF finish
// passing on what it was sent.
const drainGrace = 5 * time.Second

// Close cancels the Exec, which ends the box half, and waits for it. A
// connection whose way in has ended (CloseWrite was called) is first
// given up to drainGrace to end by itself, so that the bytes written
// last reach the target, as sshd drains a channel before it closes it;
// any other is cut at once.
func (c *conn) Close() error {
	c.once.Do(func() {
		if c.wroteEOF.Load() {
			select {
			case <-c.done:
			case <-time.After(drainGrace):
			}
		}
		c.cancel()
		c.r.CloseWithError(errEnded)
		c.w.CloseWithError(errEnded)
		<-c.done
	})
	return nil
}

// eofTracker is a relay's stdout and the reader of its stderr's eof
// line: it passes stdout on to w, and closes w (EOF for the reader) once
// the line has come and the bytes it counts have been passed on, in
// whichever order the Exec delivers the two.
type eofTracker struct {
	mu      sync.Mutex
	w       *io.PipeWriter
	written int64
	// at is the eof line's count; -1 until it came.
	at     int64
	closed bool
	// stderr gets the other lines; partial holds a line not ended yet.
	stderr  io.Writer
	partial []byte
}

func (t *eofTracker) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		// Nothing comes after the count the box half gave.
		return len(p), nil
	}
	n, err := t.w.Write(p)
	t.written += int64(n)
	t.closeIfDone()
	return n, err
}

func (t *eofTracker) closeIfDone() {
	if t.at >= 0 && t.written >= t.at && !t.closed {
		t.closed = true
		t.w.Close()
	}
}

// eofLines is the Exec's stderr for an eofTracker: the eof line goes to
// the tracker, every other line to its stderr.
type eofLines struct{ t *eofTracker }

func (e eofLines) Write(p []byte) (int, error) {
	t := e.t
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		line := t.partial[:i+1]
		t.partial = t.partial[i+1:]
		if n, ok := eofCount(line); ok && t.at < 0 {
			t.at = n
			t.closeIfDone()
			continue
		}
		t.stderr.Write(line)
	}
	if len(t.partial) > 4096 {
		t.stderr.Write(t.partial)
		t.partial = t.partial[:0]
	}
	return len(p), nil
}

// eofCount is the count of an eof line ("eof N\n"); false for any other
// line.
func eofCount(line []byte) (int64, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(eofPrefix))
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSuffix(rest, []byte("\n"))), 10, 64)
	return n, err == nil && n >= 0
}

// limitedBuffer keeps the first 4 KiB written to it: enough for the box
// half's one line, bounded whatever a broken relay prints.
type limitedBuffer struct{ b bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (l *limitedBuffer) lastLine() string {
	lines := strings.Split(strings.TrimSpace(l.b.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func joinHostPort(host string, port uint32) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.FormatUint(uint64(port), 10)
	}
	return host + ":" + strconv.FormatUint(uint64(port), 10)
}
