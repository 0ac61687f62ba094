//go:build !linux && !darwin

package localbox

import (
	"os"
	"os/exec"

	"github.com/creack/pty"
)

// startPTY is pty.StartWithSize where the local box does not run
// commands (Windows) or sets no terminal modes (other systems).
func startPTY(cmd *exec.Cmd, ws *pty.Winsize, modes []byte) (*os.File, error) {
	return pty.StartWithSize(cmd, ws)
}

// setsize is pty.Setsize.
func setsize(f *os.File, ws *pty.Winsize) error { return pty.Setsize(f, ws) }
