package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// platform is the OS the commands act for: e.GOOS, else runtime.GOOS.
func (e Env) platform() string {
	if e.GOOS != "" {
		return e.GOOS
	}
	return runtime.GOOS
}

// unixOnly names the cocoonbox commands that need a Unix laptop and why.
// Offload and back drive rsync, POSIX signals, file modes and flock; the
// local box runs its commands in Unix sessions and PTYs. The contract's
// Mac and Linux laptops have all of it; Windows gets this block
// (DESIGN.md "Platforms"), and WSL is a Linux.
var unixOnly = map[string]string{
	"offload":  "offload needs rsync and Unix processes",
	"back":     "back needs rsync and Unix processes",
	"localbox": "the local box runs its commands as Unix processes",
}

// refusePlatform refuses c, or the cocoonbox command it is a verb of,
// when goos cannot run it: one line, exit 3, before anything is read or
// written. Every other command runs everywhere.
func refusePlatform(goos string, c *cobra.Command) error {
	if goos != "windows" {
		return nil
	}
	for c.HasParent() && c.Parent().HasParent() {
		c = c.Parent()
	}
	why, ok := unixOnly[c.Name()]
	if !ok {
		return nil
	}
	return &ExitError{Code: ExitRefused, Err: fmt.Errorf("%s does not run on Windows: %s; run it on macOS, Linux or in WSL", c.Name(), why)}
}
