package rawio

import (
	"bytes"
	"io"
	"syscall"
	"testing"
)

// TestSmallWritesInOrder: small writes (raw, on the second description)
// and large ones (on f) reach the pipe's reader in order, byte for byte,
// and f's own description stays blocking.
func TestSmallWritesInOrder(t *testing.T) {
	r, w := pipe(t)
	w.Fd() // blocking, as a process's stdout
	sw := SmallWrites(w, 4096)
	if _, ok := sw.(*smallWrites); !ok {
		t.Fatalf("SmallWrites of a pipe is %T, want the raw writer", sw)
	}
	var want bytes.Buffer
	var parts [][]byte
	for i := range 3000 {
		b := bytes.Repeat([]byte{byte(i)}, i*37%9000+1)
		want.Write(b)
		parts = append(parts, b)
	}
	go func() {
		for i, b := range parts {
			if n, err := sw.Write(b); n != len(b) || err != nil {
				t.Errorf("write %d: %d, %v", i, n, err)
				break
			}
		}
		sw.Close()
	}()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("%d bytes out, want %d, or not in order", len(got), want.Len())
	}
}

// TestSmallWritesLeaveFBlocking: the raw writes' description is one of
// their own; f's stays in blocking mode.
func TestSmallWritesLeaveFBlocking(t *testing.T) {
	_, w := pipe(t)
	fd := w.Fd()
	sw := SmallWrites(w, 4096)
	defer sw.Close()
	if _, err := sw.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	flags, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	if e != 0 {
		t.Fatal(e)
	}
	if flags&syscall.O_NONBLOCK != 0 {
		t.Error("SmallWrites put f's own description in non-blocking mode")
	}
}
