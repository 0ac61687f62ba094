//go:build unix

package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// Pollable returns a file that reads and writes what f does through the
// runtime's poller: for a pipe or socket f was handed in blocking mode
// (a process's stdin and stdout are), a duplicate descriptor in
// non-blocking mode, and a func that closes it and puts the shared file
// description back in blocking mode; for anything else (a terminal, a
// regular file, or a file already non-blocking), f itself and a func that
// does nothing. A blocking read parks a thread in the kernel while it
// waits, and the runtime's sysmon, polling every 20 µs, hands that
// thread's P to another: on a stream of small requests, a wait per
// request (docs/benchmarks.md, "sftp requests through ssh --stdio").
func Pollable(f *os.File) (*os.File, func()) {
	same := func() (*os.File, func()) { return f, func() {} }
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return same()
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return same()
	}
	dup := -1
	rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil || flags&unix.O_NONBLOCK != 0 {
			return
		}
		if d, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); err == nil {
			dup = d
		}
	})
	if dup < 0 {
		return same()
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return same()
	}
	// NewFile sees the descriptor non-blocking and registers it with the
	// poller.
	g := os.NewFile(uintptr(dup), f.Name())
	return g, func() {
		// Through f, which is still open when g is closed: the
		// description is shared, and its other users expect it to block.
		rc.Control(func(fd uintptr) { unix.SetNonblock(int(fd), false) })
		g.Close()
	}
}

// PollableTerminal gives back f, a terminal's master side that ioctls
// through Fd left blocking, as a non-blocking duplicate in Go's poller,
// so that closing it ends a Read in progress (a blocking read(2) would
// wait for as long as any process keeps the terminal's other side open).
// f is closed; the error is fcntl's.
func PollableTerminal(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	name := f.Name()
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
