//go:build unix

package proc

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// blockingPipe is a pipe whose read end is in blocking mode, as a
// process's stdin from ssh is.
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	var flags int
	var err error
	rc, _ := f.SyscallConn()
	rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil {
		t.Fatal(err)
	}
	return flags&unix.O_NONBLOCK != 0
}

// TestPollable: a blocking pipe comes back read through the poller (a
// deadline works, which it only does there), reads what the pipe carries,
// and is blocking again after restore; a regular file is left alone.
func TestPollable(t *testing.T) {
	r, w := blockingPipe(t)
	if err := r.SetReadDeadline(time.Now()); !errors.Is(err, os.ErrNoDeadline) {
		t.Fatalf("a blocking pipe took a deadline (%v): the test cannot tell", err)
	}
	p, restore := Pollable(r)
	if p == r {
		t.Fatal("Pollable returned the blocking pipe itself")
	}
	if !nonblocking(t, p) {
		t.Error("the pipe Pollable returned is in blocking mode")
	}
	if err := p.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatalf("the pollable pipe takes no deadline: %v", err)
	}
	if _, err := p.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read of an empty pipe past its deadline: %v", err)
	}
	p.SetReadDeadline(time.Time{})
	w.Write([]byte("abc"))
	b := make([]byte, 8)
	if n, err := p.Read(b); string(b[:n]) != "abc" || err != nil {
		t.Errorf("read %q, %v; want abc", b[:n], err)
	}
	restore()
	if nonblocking(t, r) {
		t.Error("the pipe is still non-blocking after restore")
	}

	f, err := os.CreateTemp(t.TempDir(), "regular")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if g, restore := Pollable(f); g != f {
		t.Error("Pollable changed a regular file")
	} else {
		restore()
	}
}

// TestGrowPipeKeepsPoller: growing a pipe leaves it non-blocking, read
// through the poller; f.Fd() would have made it blocking, and each wait
// for a command's output a thread parked in read(2).
func TestGrowPipeKeepsPoller(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	GrowPipe(r, 1<<20)
	if !nonblocking(t, r) {
		t.Error("after GrowPipe the pipe is in blocking mode")
	}
}
