//go:build unix

package localbox

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
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
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		f, err := os.Open(dir)
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(-1)
		own := int(f.Fd())
		for _, n := range names {
			if fd, err := strconv.Atoi(n); err == nil && fd > 2 && fd != own {
				unix.CloseOnExec(fd)
			}
		}
		f.Close()
		return
	}
}
