//go:build unix

package sshserve

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostKeyFIFO: a FIFO in the key's place is refused at once, with the
// fix; reading it would block cocoonbox-ssh --stdio, and ssh with it.
func TestHostKeyFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, HostKeyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := HostKey(dir)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "is a named pipe (FIFO), not a regular file; remove it to make a new one") {
			t.Errorf("HostKey on a FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("HostKey on a FIFO still blocked after 10 s")
	}
}
