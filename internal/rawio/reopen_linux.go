package rawio

import (
	"os"
	"strconv"
	"syscall"
)

// reopenNonblocking opens f's pipe again for writing, through
// /proc/self/fd, as a description of its own in non-blocking mode (f's
// stays as it is), in the poller; nil if f is not a pipe or it cannot.
func reopenNonblocking(f *os.File) *os.File {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	fd := -1
	rc.Control(func(old uintptr) {
		// O_NONBLOCK: a pipe with no reader left is refused (ENXIO), not
		// waited on.
		fd, err = syscall.Open("/proc/self/fd/"+strconv.Itoa(int(old)), syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	})
	if err != nil || fd < 0 {
		return nil
	}
	return os.NewFile(uintptr(fd), f.Name())
}
