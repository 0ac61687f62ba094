package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// GrowPipe asks for a pipe buffer of size bytes (F_SETPIPE_SZ); a refusal
// only costs speed, so it is ignored.
func GrowPipe(f *os.File, size int) { unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, size) }
