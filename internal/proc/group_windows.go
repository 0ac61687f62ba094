package proc

import (
	"errors"
	"os/exec"
	"time"
)

// Group is nothing on Windows: a process there has no group that a child
// joins and that outlives its leader, so the children of a command
// killed there are not found by the next (a job object could hold them;
// the next command then fails once on what such a child still holds, a
// git lock, and says so).
type Group struct {
	Pgid  int
	Start string
}

// StartGroup returns nil: there is no group to start.
func StartGroup() (*Group, error) { return nil, nil }

// Join does nothing.
func (g *Group) Join(*exec.Cmd) {}

// Close does nothing.
func (g *Group) Close() {}

// String is "": nothing is recorded.
func (g *Group) String() string { return "" }

// ErrGroupLives is never returned on Windows.
var ErrGroupLives = errors.New("still runs after SIGKILL")

// EndGroup finds nothing: nothing is recorded on Windows.
func EndGroup(string, time.Duration, time.Duration) (bool, error) { return false, nil }
