//go:build !linux && !darwin

package localbox

import (
	"os"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// startToken is "" where the platform gives no cheap start time: a live
// recorded pid is then taken as ours when it still leads its group.
func startToken(int) string { return "" }

// exited reports whether pid is gone.
func exited(pid int) bool { return !proc.Alive(pid) }

// markedProcs finds nothing here: the platform shows no other process's
// environment cheaply (docs/self-hosting.md).
func markedProcs([]uint32, ...string) []*os.Process { return nil }

// waitExited waits for nothing here: the platform offers no wait that
// leaves the child unreaped, so the group is marked reaped just before
// Wait, and kill's SIGKILL is sent only if it comes before.
func waitExited(int) bool { return false }

// groupHasLive is not asked here (waitExited waits for nothing).
func groupHasLive(int) bool { return false }

// groupOfUIDs cannot look here: every recorded group is taken for the
// box users'.
func groupOfUIDs(int, []uint32) bool { return true }
