package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// pipe is os.Pipe's ends, non-blocking and in the poller.
func pipe(t testing.TB) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestFileBytesInOrder: what goes in through raw writes comes out of raw
// reads byte for byte, through a pipe that fills (the writer waits in the
// poller), then EOF.
func TestFileBytesInOrder(t *testing.T) {
	if !supported {
		t.Skip("no raw reads on " + runtime.GOOS + ": File is f itself")
	}
	r, w := pipe(t)
	rf, wf := File(r), File(w)
	if _, ok := rf.(*file); !ok {
		t.Fatalf("File of a non-blocking pipe is %T, want raw", rf)
	}
	want := make([]byte, 3<<20+17)
	for i := range want {
		want[i] = byte(i*7%251 + i/4093)
	}
	go func() {
		for b := want; len(b) > 0; {
			n := min(len(b), 1+len(b)%70000)
			if m, err := wf.Write(b[:n]); m != n || err != nil {
				t.Errorf("write: %d of %d, %v", m, n, err)
				return
			}
			b = b[n:]
		}
		wf.Close()
	}()
	got, err := io.ReadAll(rf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%d bytes out, want %d, or not in order", len(got), len(want))
	}
}

// TestFileCloseEndsRead: closing the file ends a read that waits in the
// poller.
func TestFileCloseEndsRead(t *testing.T) {
	if !supported {
		t.Skip("no raw reads on " + runtime.GOOS)
	}
	r, _ := pipe(t)
	rf := File(r)
	done := make(chan error, 1)
	go func() {
		_, err := rf.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	rf.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("read after close: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read in the poller did not end when the file was closed")
	}
}

// TestBlockingLeftAlone: a descriptor in blocking mode (Fd puts it there)
// is not read raw, which would hold a P for as long as the read waits.
func TestBlockingLeftAlone(t *testing.T) {
	r, w := pipe(t)
	r.Fd()
	w.Fd()
	if rf := File(r); rf != io.ReadWriteCloser(r) {
		t.Errorf("File of a blocking pipe is %T, want the *os.File itself", rf)
	}
	if sw := SmallWrites(w, 4096); sw != io.WriteCloser(w) && runtime.GOOS != "linux" {
		t.Errorf("SmallWrites on %s is %T, want the *os.File itself", runtime.GOOS, sw)
	}
}

// TestConnDeadline: a raw Conn still waits in the poller, so a read
// deadline ends its Read with a timeout; bytes pass both ways.
func TestConnDeadline(t *testing.T) {
	if !supported {
		t.Skip("no raw reads on " + runtime.GOOS)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l = Listener(l)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	d, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := Conn(d)
	defer c.Close()
	s := <-accepted
	if s == nil {
		t.FailNow()
	}
	defer s.Close()
	if _, ok := s.(*conn); !ok {
		t.Fatalf("an accepted TCP connection is %T, want raw", s)
	}
	if _, ok := s.(syscall.Conn); !ok {
		t.Error("a raw Conn hides its descriptor (syscall.Conn), which the local box's gate peeks at")
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(s, b); err != nil || string(b) != "ping" {
		t.Fatalf("read %q, %v", b, err)
	}
	s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = s.Read(b)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("read past the deadline: %v, want a timeout", err)
	}
	c.Close()
	s.SetReadDeadline(time.Time{})
	if _, err := s.Read(b); err != io.EOF {
		t.Errorf("read after the peer closed: %v, want io.EOF", err)
	}
}
