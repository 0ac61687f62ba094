package localbox

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// startToken is pid's start time from the kernel's process table, or ""
// when pid is gone.
func startToken(pid int) string { return proc.StartToken(pid) }

// exited reports whether pid is gone or a zombie.
func exited(pid int) bool {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	const zombie = 5 // SZOMB, sys/proc.h
	return err != nil || kp.Proc.P_pid != int32(pid) || kp.Proc.P_stat == zombie
}

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
