// Package flock takes advisory whole-file locks: flock(2) on Unix,
// LockFileEx on Windows. A lock belongs to the open file and ends when the
// file is closed or the process ends, so a crash never leaves one behind.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
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
		return nil, lockError(f, path, err)
	}
	return func() { f.Close() }, nil
}

// lockError closes f, which Lock failed to lock with err.
func lockError(f *os.File, path string, err error) error {
	f.Close()
	if errors.Is(err, ErrLocked) {
		return err
	}
	return fmt.Errorf("lock %s: %w", path, err)
}

// HoldContext is Hold whose wait ctx ends: a lock another process holds
// is tried again, at most every pollMax, until it is free or ctx is done
// (then the error wraps ctx's, and names path). A lock that is free is
// taken whatever ctx says. So a signal that ends ctx ends the wait, which
// a flock(2) that blocks would not let it do.
func HoldContext(ctx context.Context, path string, m Mode) (release func(), err error) {
	if ctx.Done() == nil || m&NoWait != 0 {
		return Hold(path, m)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	wait := pollMin
	for {
		err = Lock(f, m|NoWait)
		if !errors.Is(err, ErrLocked) {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("wait for the lock %s, which another process holds: %w", path, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, pollMax)
	}
	if err != nil {
		return nil, lockError(f, path, err)
	}
	return func() { f.Close() }, nil
}

// pollMin and pollMax bound HoldContext's wait between two tries.
const (
	pollMin = 5 * time.Millisecond
	pollMax = 100 * time.Millisecond
)
