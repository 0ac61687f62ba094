package boxexec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/ttymodes"
)

// A command's terminal is the box's own: the server opens it on the
// container's /dev/ptmx and relays its bytes to the host's two pipes,
// so the host never holds a descriptor that came from the box. (Had the
// server sent the terminal's master side back instead, the box, which
// could keep a copy, could switch the shared file description to
// blocking under the host's reads and writes and hold one host thread
// per terminal for as long as it liked.)

// drainMax bounds what the relay still reads from a terminal once its
// command has exited: a process of the box that keeps the terminal and
// writes without end does not keep the exit from the host.
const drainMax = 4 << 20

// terminal is a command's terminal in the box and its relay.
type terminal struct {
	master *os.File // pollable, so that a deadline ends a read
	tty    *os.File // the command's side; closed once it started
	in     *os.File // the host's stdin pipe
	out    *os.File // the host's stdout pipe
	done   chan struct{}
}

// openTerminal opens a terminal for cmd of t's size and modes, makes it
// the controlling terminal of cmd's new session, names it in SSH_TTY as
// sshd does, and installs t's terminfo entry. in and out are the host's
// pipes, which the terminal keeps.
func openTerminal(cmd *exec.Cmd, t *TTY, in, out *os.File) (*terminal, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a terminal: %w", err)
	}
	if t.Rows > 0 && t.Cols > 0 {
		pty.Setsize(ptmx, &pty.Winsize{Rows: t.Rows, Cols: t.Cols})
	}
	if len(t.Modes) > 0 {
		// As sshd, modes that cannot be set leave the terminal as it was.
		if tm, err := ttymodes.Get(int(tty.Fd())); err == nil {
			ttymodes.Apply(tm, t.Modes)
			ttymodes.Set(int(tty.Fd()), tm)
		}
	}
	master, err := proc.PollableTerminal(ptmx)
	if err != nil {
		tty.Close()
		return nil, err
	}
	if len(t.Terminfo) > 0 {
		installTerminfo(lookup(cmd.Env, "HOME"), t.Term, t.Terminfo)
	}
	cmd.Env = append(cmd.Env, "SSH_TTY="+tty.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	return &terminal{master: master, tty: tty, in: in, out: out, done: make(chan struct{})}, nil
}

// relay copies the host's stdin to the terminal until the host closes
// it, and the terminal to the host's stdout until finish.
func (t *terminal) relay() {
	go func() {
		// Ends at the host's EOF, or when the terminal is closed.
		io.Copy(t.master, t.in)
		t.in.Close()
	}()
	go func() {
		defer close(t.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := t.master.Read(buf)
			if n > 0 {
				if _, werr := t.out.Write(buf[:n]); werr != nil {
					return
				}
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.drain(buf)
				return
			}
			if err != nil {
				// EIO: every holder of the terminal's far side is gone.
				return
			}
		}
	}()
}

// drain copies what the terminal holds, without waiting, up to drainMax.
func (t *terminal) drain(buf []byte) {
	rc, err := t.master.SyscallConn()
	if err != nil {
		return
	}
	for total := 0; total < drainMax; {
		var n int
		rc.Control(func(fd uintptr) { n, _ = unix.Read(int(fd), buf) })
		if n <= 0 {
			return
		}
		if _, err := t.out.Write(buf[:n]); err != nil {
			return
		}
		total += n
	}
}

// finish ends the relay once the command was reaped: what the terminal
// holds goes to the host, then the host's stdout ends and the terminal
// is closed (any process of the box still on it gets its hangup, as
// under sshd).
func (t *terminal) finish() {
	t.master.SetReadDeadline(time.Now())
	<-t.done
	t.close()
}

// close closes the terminal and the host's pipes.
func (t *terminal) close() {
	t.master.Close()
	t.tty.Close()
	t.in.Close()
	t.out.Close()
}

// setSize sets the terminal's size: the kernel sends the foreground
// group SIGWINCH.
func (t *terminal) setSize(rows, cols uint16) {
	rc, err := t.master.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
}

// termName is a terminal name that is safe as a file name.
var termName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$`)

// installTerminfo puts entry, the compiled terminfo entry of term, in
// home's .terminfo under both directory schemes (its first letter, and
// that letter's hex code) where it has none, as the local box's API
// path does.
func installTerminfo(home, term string, entry []byte) {
	if home == "" || !termName.MatchString(term) {
		return
	}
	for _, sub := range []string{term[:1], fmt.Sprintf("%x", term[0])} {
		d := filepath.Join(home, ".terminfo", sub)
		f := filepath.Join(d, term)
		if _, err := os.Lstat(f); err == nil {
			continue
		}
		if os.MkdirAll(d, 0o755) != nil {
			return
		}
		os.WriteFile(f, entry, 0o644)
	}
}

// lookup is the value of name in env, "" when it has none.
func lookup(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
