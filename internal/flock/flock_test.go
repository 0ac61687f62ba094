package flock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two open files of one path conflict as flock(2) says: exclusive against
// anything, shared against exclusive only.
func TestLockConflicts(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()
	if err := Lock(a, Exclusive|NoWait); err != nil {
		t.Fatalf("first lock: %v", err)
	}
	if err := Lock(b, NoWait); !errors.Is(err, ErrLocked) {
		t.Fatalf("shared lock beside an exclusive one: %v, want ErrLocked", err)
	}
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := Lock(b, NoWait); err != nil {
		t.Fatalf("shared lock after unlock: %v", err)
	}
	if err := Lock(a, NoWait); err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
	c := open()
	if err := Lock(c, Exclusive|NoWait); !errors.Is(err, ErrLocked) {
		t.Fatalf("exclusive lock beside shared ones: %v, want ErrLocked", err)
	}
	a.Close()
	b.Close()
	if err := Lock(c, Exclusive|NoWait); err != nil {
		t.Fatalf("exclusive lock after the holders closed: %v", err)
	}
}

// Hold creates the lock file 0600, a second Hold without waiting is
// ErrLocked, and the release lets the next one in.
func TestHold(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	release, err := Hold(p, Exclusive|NoWait)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file: %v, %v", fi, err)
	}
	if _, err := Hold(p, Exclusive|NoWait); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Hold: %v, want ErrLocked", err)
	}
	release()
	release, err = Hold(p, Exclusive|NoWait)
	if err != nil {
		t.Fatalf("Hold after the release: %v", err)
	}
	release()
}

// HoldContext waits while another open file holds the lock, until the
// holder lets go, or ctx ends the wait; a free lock is taken even with
// ctx done.
func TestHoldContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	release, err := Hold(p, Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		r, err := HoldContext(ctx, p, Exclusive)
		if err == nil {
			r()
		}
		got <- err
	}()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), p) {
		t.Errorf("HoldContext ended by its context: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() {
		r, err := HoldContext(ctx2, p, Exclusive)
		if err == nil {
			r()
		}
		got <- err
	}()
	release()
	if err := <-got; err != nil {
		t.Errorf("HoldContext once the holder let go: %v", err)
	}
	if r, err := HoldContext(ctx, p, Exclusive); err != nil {
		t.Errorf("HoldContext of a free lock with its context done: %v", err)
	} else {
		r()
	}
}
