//go:build linux || darwin

package localbox

import (
	"os"
	"os/exec"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/ttymodes"
)

// startPTY starts cmd on a new terminal of size ws, as its session's
// controlling terminal, and returns the terminal's master side. Unlike
// pty.StartWithSize it names the terminal in SSH_TTY first and sets the
// client's terminal modes on it (RFC 4254 section 8), as sshd does.
func startPTY(cmd *exec.Cmd, ws *pty.Winsize, modes []byte) (*os.File, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	if err := pty.Setsize(ptmx, ws); err != nil {
		ptmx.Close()
		return nil, err
	}
	if len(modes) > 0 {
		// As sshd, modes that cannot be set leave the terminal as it was.
		if t, err := ttymodes.Get(int(tty.Fd())); err == nil {
			ttymodes.Apply(t, modes)
			ttymodes.Set(int(tty.Fd()), t)
		}
	}
	cmd.Env = append(cmd.Env, "SSH_TTY="+tty.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	if ptmx, err = proc.PollableTerminal(ptmx); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		return nil, err
	}
	return ptmx, nil
}

// setsize sets the size of terminal f without pty.Setsize, whose use of
// Fd would make f blocking again.
func setsize(f *os.File, ws *pty.Winsize) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	w := &unix.Winsize{Row: ws.Rows, Col: ws.Cols, Xpixel: ws.X, Ypixel: ws.Y}
	if cerr := rc.Control(func(fd uintptr) { err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, w) }); cerr != nil {
		return cerr
	}
	return err
}
