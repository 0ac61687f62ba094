package proc

import (
	"os"
	"syscall"
)

// PeakRSS is the peak resident set of ps's process in KiB, 0 if unknown.
// Darwin counts ru_maxrss in bytes.
func PeakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss / 1024
	}
	return 0
}
