//go:build unix

package share

import (
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// CloseInherited closes the descriptors above LockFD that this process
// inherited: Go opens its own close-on-exec, so any without that flag came
// from whoever started the process, and a master living on must not hold
// them (a pipe would never see its end).
func CloseInherited() {
	for _, fd := range proc.OpenFDs() {
		if fd <= LockFD {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}
