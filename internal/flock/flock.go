// Package flock takes advisory whole-file locks: flock(2) on Unix,
// LockFileEx on Windows. A lock belongs to the open file and ends when the
// file is closed or the process ends, so a crash never leaves one behind.
package flock

import "errors"

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
