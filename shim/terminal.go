package shim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/term"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// TerminalFd is stdin's file descriptor when stdin is a terminal, else
// -1: the Fd of a Terminal.
func TerminalFd(stdin io.Reader) int {
	f, ok := stdin.(interface{ Fd() uintptr })
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return -1
	}
	return int(f.Fd())
}

// terminal runs cmd on a remote terminal (Terminal), as ssh: 255 when
// ~. or a signal ended the session, else the command's status.
func (r *runner) terminal(c *box.Client, cmd *box.Command, fd int) int {
	t := &Terminal{Fd: fd, Getenv: r.getenv, Escape: r.o.EscapeChar, Msgs: r.env.Stderr,
		OnRaw: func(raw bool) { r.raw = raw }}
	cmd.TTY = t.TTY()
	r.debugf(LogDebug1, "Requesting a terminal: TERM=%s, %d rows, %d columns, terminfo %d bytes", cmd.TTY.Term, cmd.TTY.Rows, cmd.TTY.Cols, len(cmd.TTY.Terminfo))
	end, st, err := t.Run(c, cmd)
	if end.Signal != nil {
		r.debugf(LogDebug1, "Killed by signal %d.", end.Signal.(syscall.Signal))
		return ExitFailure
	}
	if end.Disconnected {
		r.closed()
		return ExitFailure
	}
	code := r.status(st, err)
	if err == nil && st.Error == "" {
		r.closed()
	}
	return code
}

// Terminal is the local half of a remote command on a terminal, as ssh(1)
// runs one: the command gets a terminal of the local one's size and
// modes, with $TERM and its terminfo entry; the local terminal goes raw
// only once the command has started (while we connect or wake the box,
// Ctrl-C must still reach us as SIGINT) and gets its exact termios back
// on every way out; SIGWINCH resizes the remote terminal; ssh's escapes
// work on the input (ssh(1) ESCAPE CHARACTERS); INT, TERM, HUP and QUIT
// end the session, but HUP leaves a resumable one in the box
// (box.ErrDetached). A resumable session's reconnecting line goes to
// Msgs, in place. cocoonbox-ssh -t and `cocoonbox offload sign-in` are
// its users.
type Terminal struct {
	// Fd is the local terminal, stdin's descriptor (TerminalFd), or -1
	// for none: then nothing goes raw, is resized or restored.
	Fd int
	// Getenv reads $TERM and the variables that locate its terminfo entry
	// ($TERMINFO, $HOME, $TERMINFO_DIRS).
	Getenv func(string) string
	// Escape is the escape character ('~' for ssh's default), or
	// EscapeNone for none.
	Escape int
	// Msgs receives the escapes' own output (~? lists them): stderr.
	Msgs io.Writer
	// OnRaw, when not nil, is called with true once the terminal is raw
	// and with false once it is restored, from any goroutine.
	OnRaw func(raw bool)
}

// TerminalEnd is how a Terminal session ended other than by the command.
type TerminalEnd struct {
	// Disconnected says ~. ended it.
	Disconnected bool
	// Signal is the signal (INT, TERM, HUP or QUIT) that ended it, or nil.
	Signal os.Signal
}

// TTY is the remote terminal the command asks for: $TERM, the local
// terminal's size and modes (read before it goes raw, as ssh's pty-req
// is), and the terminfo entry of $TERM where ncurses would find it here.
func (t *Terminal) TTY() *box.TTY {
	tty := &box.TTY{Term: t.Getenv("TERM")}
	if t.Fd >= 0 {
		if w, h, err := term.GetSize(t.Fd); err == nil {
			tty.Rows, tty.Cols = uint32(h), uint32(w)
		}
		tty.Modes = terminalModes(t.Fd)
	}
	tty.Terminfo = terminfo(tty.Term, t.Getenv)
	return tty
}

// Run runs cmd on c on a remote terminal: cmd.TTY (t.TTY() when nil),
// with cmd.Stdin passed through the escapes and cmd.Resizes and
// cmd.Started set here. end says whether ~. or a signal ended the
// session; st and err are then Exec's after its cancellation, else the
// command's status and Exec's error. The local terminal is as it was
// before Run when Run returns, whatever ended it.
func (t *Terminal) Run(c *box.Client, cmd *box.Command) (end TerminalEnd, st box.ExitStatus, err error) {
	if cmd.TTY == nil {
		cmd.TTY = t.TTY()
	}
	fd := t.Fd
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancel := func() { cancelCause(nil) }
	defer cancel()
	if fd >= 0 && cmd.StatusLine == nil {
		cmd.StatusLine = t.Msgs
		if t.Escape != EscapeNone && cmd.Stdin != nil {
			cmd.GiveUp = escapeName(t.Escape) + ". gives up"
		}
	}
	var mu sync.Mutex
	restore := func() {}
	started := cmd.Started
	cmd.Started = func() {
		if started != nil {
			started()
		}
		if fd < 0 {
			return
		}
		if old, err := term.MakeRaw(fd); err == nil {
			mu.Lock()
			if t.OnRaw != nil {
				t.OnRaw(true)
			}
			restore = sync.OnceFunc(func() {
				term.Restore(fd, old)
				if t.OnRaw != nil {
					t.OnRaw(false)
				}
			})
			mu.Unlock()
		}
	}
	restoreNow := func() {
		mu.Lock()
		f := restore
		mu.Unlock()
		f()
	}
	defer restoreNow()
	var disconnected atomic.Bool
	if t.Escape != EscapeNone && cmd.Stdin != nil {
		cmd.Stdin = &escapeReader{
			r:         cmd.Stdin,
			esc:       byte(t.Escape),
			msgs:      t.Msgs,
			lineStart: true,
			quit: func() {
				disconnected.Store(true)
				cancel()
			},
		}
	}
	resizes := make(chan box.Size, 1)
	cmd.Resizes = resizes
	var killedBy atomic.Value
	stop := watchTerminal(ctx, fd, resizes, func(s os.Signal) {
		killedBy.Store(s)
		if s == syscall.SIGHUP {
			// The terminal has gone (a closed tab or window): a
			// resumable session stays in the box to be taken back, as
			// screen's autodetach does; else it ends.
			cancelCause(box.ErrDetached)
			return
		}
		cancel()
	})
	defer stop()

	st, err = c.Exec(ctx, cmd)
	stop()
	restoreNow()
	if s := killedBy.Load(); s != nil {
		end.Signal = s.(os.Signal)
	}
	end.Disconnected = disconnected.Load() && end.Signal == nil
	return end, st, err
}

// closed says "Connection to BOX closed.", as ssh does after a terminal
// session unless -q.
func (r *runner) closed() {
	if r.o.LogLevel >= LogInfo {
		fmt.Fprintf(r.env.Stderr, "Connection to %s closed.\r\n", r.o.Box())
	}
}

// watchTerminal sends the new size of terminal fd on resizes after each
// SIGWINCH, and calls kill on INT, TERM, HUP or QUIT, until ctx ends or
// stop is called.
func watchTerminal(ctx context.Context, fd int, resizes chan box.Size, kill func(os.Signal)) (stop func()) {
	winch := make(chan os.Signal, 1)
	if fd >= 0 {
		proc.NotifyResize(winch)
	}
	sigs := make(chan os.Signal, 1)
	notifyUnignored(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sigs:
				kill(s)
				return
			case <-winch:
				w, h, err := term.GetSize(fd)
				if err != nil {
					continue
				}
				// Only the latest size matters: replace one not yet sent.
				select {
				case <-resizes:
				default:
				}
				resizes <- box.Size{Rows: uint32(h), Cols: uint32(w)}
			}
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
		signal.Stop(winch)
		signal.Stop(sigs)
	})
}

// crlfWriter turns "\n" into "\r\n", for our lines on a raw terminal.
type crlfWriter struct{ w io.Writer }

func (c crlfWriter) Write(p []byte) (int, error) {
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escapeReader applies ssh's escapes to terminal input (ssh(1) ESCAPE
// CHARACTERS): after a newline, esc '.' disconnects, esc '?' lists the
// escapes, esc esc sends one esc, and esc before anything else sends both.
type escapeReader struct {
	r    io.Reader
	esc  byte
	msgs io.Writer // where the escapes answer: stderr
	quit func()    // called on esc '.'

	lineStart bool // the last byte ended a line, or none came yet
	pending   bool // the last byte was an esc at a line's start
	in        [32 << 10]byte
	out       []byte
	err       error
}

func (e *escapeReader) Read(p []byte) (int, error) {
	for len(e.out) == 0 && e.err == nil {
		n, err := e.r.Read(e.in[:])
		e.filter(e.in[:n])
		if err != nil && e.err == nil {
			e.err = err
		}
	}
	if len(e.out) > 0 {
		n := copy(p, e.out)
		e.out = e.out[n:]
		return n, nil
	}
	return 0, e.err
}

func (e *escapeReader) filter(b []byte) {
	for _, c := range b {
		if e.err != nil {
			return
		}
		if e.pending {
			e.pending = false
			switch c {
			case '.':
				// OpenSSH queues "~.\r\n" for stderr here but quits before
				// writing it, so nothing is said.
				e.err = io.EOF
				e.quit()
				return
			case '?':
				e.help()
				continue
			case e.esc:
				// One esc goes through below.
			default:
				e.out = append(e.out, e.esc)
			}
		} else if e.lineStart && c == e.esc {
			e.pending = true
			continue
		}
		e.lineStart = c == '\r' || c == '\n'
		e.out = append(e.out, c)
	}
}

func (e *escapeReader) help() {
	var b strings.Builder
	fmt.Fprintf(&b, "%c?\r\nSupported escape sequences:\r\n", e.esc)
	fmt.Fprintf(&b, " %c%-3s - %s\r\n", e.esc, ".", "terminate connection")
	fmt.Fprintf(&b, " %c%-3s - %s\r\n", e.esc, "?", "this message")
	fmt.Fprintf(&b, " %c%c   - send the escape character by typing it twice\r\n", e.esc, e.esc)
	b.WriteString("(Note that escapes are only recognized immediately after newline.)\r\n")
	io.WriteString(e.msgs, b.String())
}

// termRE is a terminal name that is safe as a file name.
var termRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$`) })

// maxTerminfo bounds a compiled terminfo entry we send, in bytes.
const maxTerminfo = 64 << 10

// terminfo reads the compiled terminfo entry for name where ncurses looks
// for it (terminfo(5) "Fetching Compiled Descriptions"): $TERMINFO,
// ~/.terminfo, $TERMINFO_DIRS, then the system directories; each keeps
// entries under their first letter or its hex code. It returns nil when
// there is none.
func terminfo(name string, getenv func(string) string) []byte {
	if !termRE().MatchString(name) {
		return nil
	}
	var dirs []string
	if d := getenv("TERMINFO"); d != "" {
		dirs = append(dirs, d)
	}
	if h := getenv("HOME"); h != "" {
		dirs = append(dirs, filepath.Join(h, ".terminfo"))
	}
	for _, d := range strings.Split(getenv("TERMINFO_DIRS"), ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, "/etc/terminfo", "/lib/terminfo", "/usr/share/terminfo", "/usr/lib/terminfo")
	for _, d := range dirs {
		for _, sub := range []string{name[:1], fmt.Sprintf("%02x", name[0])} {
			if b := readTerminfo(filepath.Join(d, sub, name)); b != nil {
				return b
			}
		}
	}
	return nil
}

// readTerminfo reads a compiled entry: legacy (magic 0432) or extended
// number (01036) format, at most maxTerminfo bytes.
func readTerminfo(p string) []byte {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTerminfo+1))
	if err != nil || len(b) > maxTerminfo || len(b) < 12 {
		return nil
	}
	if !bytes.HasPrefix(b, []byte{0x1a, 0x01}) && !bytes.HasPrefix(b, []byte{0x1e, 0x02}) {
		return nil
	}
	return b
}
