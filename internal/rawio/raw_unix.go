//go:build unix

package rawio

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

const supported = true

// nonblocking reports whether rc's descriptor has O_NONBLOCK set.
func nonblocking(rc syscall.RawConn) bool {
	var ok bool
	rc.Control(func(fd uintptr) {
		flags, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		ok = e == 0 && flags&syscall.O_NONBLOCK != 0
	})
	return ok
}

// read reads into p once the descriptor has data, waiting in the
// poller; io.EOF at its end. The error of a failed read is an
// *os.SyscallError, the poller's (a deadline, a closed descriptor) as is.
func read(rc syscall.RawConn, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			if e == syscall.EINTR {
				continue
			}
			n, errno = int(r), e
			return e != syscall.EAGAIN
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// write writes all of p, waiting in the poller while the descriptor is
// full.
func write(rc syscall.RawConn, p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, os.NewSyscallError("write", errno)
	}
	return n, nil
}
