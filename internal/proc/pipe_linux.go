package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// GrowPipe asks for a pipe buffer of size bytes (F_SETPIPE_SZ); a refusal
// only costs speed, so it is ignored. It goes through SyscallConn, not
// f.Fd(): Fd puts the file in blocking mode, and a blocking read parks a
// thread in the kernel, which the runtime's sysmon then replaces every
// 20 µs (docs/benchmarks.md, "sftp requests": 3× the context switches).
func GrowPipe(f *os.File, size int) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size) })
	}
}
