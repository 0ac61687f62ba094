package box

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// DefaultTerminalWindow is how long a command on a terminal is kept in
// its box for its client to come back (a lunch break, a closed laptop),
// and how long the client tries.
const DefaultTerminalWindow = time.Hour

// ErrDetached is the cause to cancel a resumable Exec's context with to
// leave its command running in the box for its window, to be taken back
// (a terminal whose window was closed, an ssh connection that died):
// Exec then returns an error that wraps it, naming the session.
var ErrDetached = errors.New("detached")

// termState is what a resumable session on a terminal adds.
type termState struct {
	// size is the terminal's latest size, sent again at each resume.
	size Size
	// adopt is set for a client taking a session back (Command.Attach):
	// its stdin and output start where the box's stand; owner is its
	// token, taken the first attach that got a hello.
	adopt bool
	owner string
	taken bool
	// shown is set while the reconnecting line is on the terminal.
	shown bool
}

// startTerm makes s a terminal session: the terminal window, and for an
// Attach, the session's id and a client token of its own.
func (s *rsession) startTerm() {
	s.term = &termState{}
	if t := s.cmd.TTY; t != nil {
		s.term.size = Size{Rows: t.Rows, Cols: t.Cols}
	}
	s.r.Window = s.r.TerminalWindow
	if s.r.Window <= 0 {
		s.r.Window = DefaultTerminalWindow
	}
	if s.cmd.Attach != "" {
		tok := make([]byte, 16)
		rand.Read(tok)
		s.id, s.hello = s.cmd.Attach, true
		s.term.adopt, s.term.owner = true, hex.EncodeToString(tok)
	}
}

var termNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$`) })

// termLine is the agent's command line for a terminal session: an open
// with the terminal's type, size and modes, or an attach as the client.
func (s *rsession) termLine(hello bool) string {
	if hello {
		line := "attach "
		if s.term.owner != "" {
			line += "--owner " + s.term.owner + " "
			s.mu.Lock()
			taken := s.term.taken
			s.mu.Unlock()
			if !taken {
				line += "--take "
			}
		}
		return s.agentLine(line + s.id)
	}
	t := s.cmd.TTY
	term := t.Term
	if !termNameRE().MatchString(term) {
		term = "dumb"
	}
	spec := fmt.Sprintf("%s:%dx%d", term, min(t.Rows, 65535), min(t.Cols, 65535))
	if len(t.Modes) > 0 {
		spec += ":" + hex.EncodeToString(t.Modes)
	}
	return s.agentLine("open --tty " + spec + " " + s.id + " " + s.r.Window.String() + " -- " + shellquote.Quote(s.cmd.Line))
}

// termEnv is the open's environment: the command's, and the terminfo
// entry of the terminal's type, if the client has one, for the agent to
// install where the box has none (as a plain Exec's tty carries it).
func (s *rsession) termEnv() map[string]string {
	t := s.cmd.TTY
	if len(t.Terminfo) == 0 || !termNameRE().MatchString(t.Term) {
		return s.cmd.Env
	}
	env := make(map[string]string, len(s.cmd.Env)+1)
	for k, v := range s.cmd.Env {
		env[k] = v
	}
	env["COCOONBOX_TERMINFO"] = base64.StdEncoding.EncodeToString(t.Terminfo)
	return env
}

// waitAdopt holds a client taking a session back from reading stdin until
// the box said where the command's stdin stands; false if the session
// ended first.
func (s *rsession) waitAdopt() bool {
	if s.term == nil || !s.term.adopt {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.done && !s.term.taken {
		s.cond.Wait()
	}
	return !s.done
}

// termResumed is a terminal session's answer to a hello: the
// reconnecting line goes and the cursor is back where the program left
// it.
func (s *rsession) termResumed(lostAt time.Time) {
	s.mu.Lock()
	t := s.term
	t.taken = true
	shown := t.shown
	t.shown = false
	s.cond.Broadcast()
	s.mu.Unlock()
	if shown {
		io.WriteString(s.cmd.StatusLine, "\r\x1b[K\x1b8")
	} else if !lostAt.IsZero() {
		s.notify("resumed after %s", since(lostAt))
	}
}

// termNudge appends to an attach's first frames the terminal's size
// (it may have changed meanwhile) with a nudge before it, one column
// less, so that a full-screen program redraws its screen; before any
// stdin, so that what was typed meanwhile finds the new size.
func (s *rsession) termNudge(b []byte) []byte {
	s.mu.Lock()
	size := s.term.size
	s.mu.Unlock()
	if size.Cols > 1 {
		b = sessionwire.Append(b, sessionwire.Frame{Type: sessionwire.Resize, Rows: size.Rows, Cols: size.Cols - 1})
	}
	return sessionwire.Append(b, sessionwire.Frame{Type: sessionwire.Resize, Rows: size.Rows, Cols: size.Cols})
}

// termNotify shows line on the raw local terminal: the reconnecting line
// in place, on a line of its own below the program's cursor (saved, so
// that termResumed puts it back), any other as a line of its own.
func (s *rsession) termNotify(line string) {
	p := s.r.Prefix
	if p == "" {
		p = "cocoonbox: "
	}
	s.mu.Lock()
	shown := s.term.shown
	status := strings.HasPrefix(line, "connection to ")
	s.term.shown = status
	s.mu.Unlock()
	w := s.cmd.StatusLine
	if status && s.cmd.GiveUp != "" {
		line += "; " + s.cmd.GiveUp
	}
	switch {
	case status && shown:
		io.WriteString(w, "\r\x1b[K"+p+line)
	case status:
		// Down a line and back up keeps the column and makes the room
		// below (scrolling if the cursor was on the last row) before the
		// cursor is saved.
		io.WriteString(w, "\n\x1b[A\x1b7\n\r\x1b[K"+p+line)
	case shown:
		io.WriteString(w, "\r\x1b[K"+p+line+"\r\n")
	default:
		io.WriteString(w, p+line+"\r\n")
	}
}

// adoptFailed is the error of a client taking a session back whose first
// attach ended without the box's hello (st, err its Exec's), nil
// otherwise: the agent cannot hold sessions, or said why in a fail.
func (s *rsession) adoptFailed(st ExitStatus, err error) error {
	if s.term == nil || !s.term.adopt || err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.term.taken || s.fail != "" || s.exit != nil {
		return nil
	}
	return fmt.Errorf("take session %s of %s back: the box's cocoonbox-agent has no sessions (%s)", s.id, s.cmd.Box, st.Text())
}

// detached is Exec's error for a session left in the box.
func (s *rsession) detached() error {
	return fmt.Errorf("%w: the session %s stays in %s for %s; take it back with: cocoonbox rsh --attach %s %s",
		ErrDetached, s.id, s.cmd.Box, s.r.Window, s.cmd.Box, s.id)
}

// maxSessionList bounds the answer of a box's `session list` that
// Sessions reads, in bytes: thousands of sessions, and no more of a
// box's memory on the laptop.
const maxSessionList = 1 << 20

// errListTooLong ends the read of a session list past maxSessionList.
var errListTooLong = errors.New("too long")

// capWriter keeps what is written to it up to max bytes; past that its
// writes fail with errListTooLong, which ends the Exec.
type capWriter struct {
	b   strings.Builder
	max int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		return 0, errListTooLong
	}
	return w.b.Write(p)
}

func (w *capWriter) String() string { return w.b.String() }

// SessionIDRE is the form of a session's id as a client makes it (16
// random bytes in hex) and the only one it attaches to: the id goes on
// the agent's command line.
var SessionIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{1,64}$`) })

// Sessions lists the sessions box keeps, as its agent reports them. The
// box's answer is read up to 1 MiB; its fields are the box's, to be made
// printable before they reach a terminal.
func (c *Client) Sessions(ctx context.Context, box string) ([]sessionwire.Info, error) {
	out, errOut := &capWriter{max: maxSessionList}, &capWriter{max: maxSessionList}
	st, err := c.exec(ctx, &Command{Box: box, Line: "cocoonbox-agent session list", Stdout: out, Stderr: errOut})
	if errors.Is(err, errListTooLong) {
		return nil, fmt.Errorf("list the sessions of %s: its answer passed 1 MiB; look in the box: cocoonbox-agent session list", box)
	}
	if err != nil {
		return nil, err
	}
	if st.Code != 0 || st.Error != "" || st.Signal != "" {
		why := strings.TrimSpace(errOut.String())
		if why == "" {
			why = st.Text()
		}
		return nil, fmt.Errorf("list the sessions of %s: %s (its cocoonbox-agent may have no sessions)", box, why)
	}
	var list []sessionwire.Info
	dec := json.NewDecoder(strings.NewReader(out.String()))
	for dec.More() {
		var i sessionwire.Info
		if err := dec.Decode(&i); err != nil {
			return nil, fmt.Errorf("list the sessions of %s: %v", box, err)
		}
		list = append(list, i)
	}
	return list, nil
}
