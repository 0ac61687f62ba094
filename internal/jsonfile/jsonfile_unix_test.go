//go:build unix

package jsonfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// TestReadNotRegular: a FIFO, or a link to one or to /dev/zero, is
// refused at once, never waited on or read without end; a file past
// MaxSize is refused unread.
func TestReadNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	toFifo, toZero := filepath.Join(dir, "to-fifo.json"), filepath.Join(dir, "to-zero.json")
	if err := os.Symlink(fifo, toFifo); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", toZero); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, toFifo, toZero} {
		done := make(chan error, 1)
		go func() {
			var v any
			_, err := Read(p, &v)
			done <- err
		}()
		select {
		case err := <-done:
			if _, ok := errors.AsType[*safefile.NotRegularError](err); !ok {
				t.Errorf("Read(%s): %v, want a NotRegularError", p, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("Read(%s) still blocked after a minute", p)
		}
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxSize+1); err != nil {
		t.Fatal(err)
	}
	var v any
	if _, err := Read(big, &v); !isTooLarge(err) {
		t.Errorf("Read of MaxSize+1 bytes: %v, want a TooLargeError", err)
	}
}

func isTooLarge(err error) bool {
	_, ok := errors.AsType[*safefile.TooLargeError](err)
	return ok
}
