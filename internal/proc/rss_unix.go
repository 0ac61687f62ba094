//go:build unix && !darwin

package proc

import (
	"os"
	"syscall"
)

// PeakRSS is the peak resident set of ps's process in KiB, 0 if unknown.
func PeakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}
