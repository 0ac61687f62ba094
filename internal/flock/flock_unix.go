//go:build unix

package flock

import (
	"errors"
	"os"
	"syscall"
)

// Lock locks f as m says. It waits unless m has NoWait, and retries an
// interrupted wait. The error is ErrLocked, or the system's.
func Lock(f *os.File, m Mode) error {
	how := syscall.LOCK_SH
	if m&Exclusive != 0 {
		how = syscall.LOCK_EX
	}
	if m&NoWait != 0 {
		how |= syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrLocked
		}
		return err
	}
}

// Unlock releases f's lock; closing f does too.
func Unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
