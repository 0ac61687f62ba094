package localbox

import (
	"os"
	"os/exec"

	"github.com/creack/pty"
)

// startPTY fails on Windows, which the local box does not serve.
func startPTY(cmd *exec.Cmd, ws *pty.Winsize) (*os.File, error) {
	return pty.StartWithSize(cmd, ws)
}
