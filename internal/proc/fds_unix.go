//go:build unix

package proc

import (
	"os"
	"strconv"
)

// OpenFDs lists this process's open descriptors, read from /proc/self/fd
// (Linux) or /dev/fd (macOS, the BSDs), without the one used to read it;
// nil when neither can be read.
func OpenFDs() []int {
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		f, err := os.Open(dir)
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(-1)
		own := int(f.Fd())
		f.Close()
		var fds []int
		for _, n := range names {
			if fd, err := strconv.Atoi(n); err == nil && fd != own {
				fds = append(fds, fd)
			}
		}
		return fds
	}
	return nil
}
