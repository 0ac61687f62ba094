package flock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// Lock locks f as m says. It waits unless m has NoWait. The error is
// ErrLocked, or the system's.
func Lock(f *os.File, m Mode) error {
	var flags uint32
	if m&Exclusive != 0 {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	if m&NoWait != 0 {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return ErrLocked
	}
	return err
}

// Unlock releases f's lock; closing f does too.
func Unlock(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, new(windows.Overlapped))
}
