//go:build unix

package localbox

import (
	"os"
	"os/exec"

	"github.com/creack/pty"
)

// startPTY starts cmd on a new terminal of size ws, as its session's
// controlling terminal, and returns the terminal's master side. Unlike
// pty.StartWithSize it names the terminal in SSH_TTY first, as sshd does.
func startPTY(cmd *exec.Cmd, ws *pty.Winsize) (*os.File, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	if err := pty.Setsize(ptmx, ws); err != nil {
		ptmx.Close()
		return nil, err
	}
	cmd.Env = append(cmd.Env, "SSH_TTY="+tty.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		return nil, err
	}
	return ptmx, nil
}
