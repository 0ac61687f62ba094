//go:build unix

package mux

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseInherited closes the descriptors above LockFD that this process
// inherited: Go opens its own close-on-exec, so any without that flag came
// from whoever started the process, and a master living on must not hold
// them (a pipe would never see its end).
func CloseInherited() {
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		f, err := os.Open(dir)
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(-1)
		own := int(f.Fd())
		for _, n := range names {
			fd, err := strconv.Atoi(n)
			if err != nil || fd <= LockFD || fd == own {
				continue
			}
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
				unix.Close(fd)
			}
		}
		f.Close()
		return
	}
}
