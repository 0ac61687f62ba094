package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// GrowPipe asks for a pipe buffer of size bytes (F_SETPIPE_SZ); a refusal
// only costs speed, so it is ignored. It goes through SyscallConn, not
// f.Fd(): Fd puts the file in blocking mode, and then each wait for the
// pipe parks a thread in read(2) instead of the poller (Pollable says
// what that costs).
func GrowPipe(f *os.File, size int) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size) })
	}
}
