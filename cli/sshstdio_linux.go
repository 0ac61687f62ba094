package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// stdioPipeSize is what --stdio asks its pipes to ssh to hold, in bytes
// (Linux's default is 64 KiB, and an unprivileged process may ask for up
// to /proc/sys/fs/pipe-max-size, 1 MiB by default).
const stdioPipeSize = 1 << 20

// growPipes makes those of the streams that are pipes hold stdioPipeSize,
// so that ssh reads and we write up to 256 KiB at a time rather than
// 64 KiB (docs/benchmarks.md: 18% less CPU on a 1 GiB download). Anything
// else, or a refusal, is left as it is.
func growPipes(streams ...any) {
	for _, s := range streams {
		if f, ok := s.(*os.File); ok {
			unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, stdioPipeSize)
		}
	}
}
