//go:build unix

package localbox

import (
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// isGroupLeader reports whether pid leads its process group.
func isGroupLeader(pid int) bool {
	g, err := unix.Getpgid(pid)
	return err == nil && g == pid
}

// CloseInherited marks every descriptor of this process above stderr
// close-on-exec: Go opens its own so, but one inherited from the process
// that started this one (a shell's, say) would otherwise pass to every
// process it starts, box commands included.
func CloseInherited() {
	for _, fd := range proc.OpenFDs() {
		if fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
