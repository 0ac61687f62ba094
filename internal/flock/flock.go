// Package flock takes advisory whole-file locks: flock(2) on Unix,
// LockFileEx on Windows. A lock belongs to the open file and ends when the
// file is closed or the process ends, so a crash never leaves one behind.
package flock

import (
	"errors"
	"fmt"
	"os"
)

// ErrLocked is the error of a non-waiting Lock when another open file
// holds a conflicting lock.
var ErrLocked = errors.New("locked by another process")

// Mode says how Lock locks: shared or exclusive, waiting or not.
type Mode int

const (
	// Exclusive takes the lock alone; without it the lock is shared.
	Exclusive Mode = 1 << iota
	// NoWait makes Lock fail with ErrLocked rather than wait.
	NoWait
)

// Hold locks the file at path (created 0600 when missing) as m says and
// returns the lock's release, which closes the file. The file stays:
// removing a lock file would let two processes lock different files. The
// error is the open's, ErrLocked, or the lock's naming path.
func Hold(path string, m Mode) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := Lock(f, m); err != nil {
		f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, err
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
