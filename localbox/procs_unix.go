//go:build unix

package localbox

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// groupAlive reports whether any process of group pgid lives.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) != syscall.ESRCH }

// procAlive reports whether process pid lives.
func procAlive(pid int) bool { return syscall.Kill(pid, 0) != syscall.ESRCH }

// isGroupLeader reports whether pid leads its process group.
func isGroupLeader(pid int) bool {
	g, err := unix.Getpgid(pid)
	return err == nil && g == pid
}

// killGroup sends SIGTERM, or SIGKILL when hard, to group pgid.
func killGroup(pgid int, hard bool) {
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pgid, sig)
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
