package halfclose

import (
	"io"
	"net"
	"testing"
)

// pair is a loopback TCP connection: both ends have CloseWrite.
func pair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// TestJoin: each end's half-close reaches the other end, and the
// direction still open carries bytes after it.
func TestJoin(t *testing.T) {
	client, a := pair(t)
	b, target := pair(t)
	done := make(chan struct{})
	go func() { Join(a, b); close(done) }()

	client.Write([]byte("ping"))
	client.CloseWrite()
	got, err := io.ReadAll(target)
	if err != nil || string(got) != "ping" {
		t.Fatalf("target read %q, %v", got, err)
	}
	target.Write([]byte("pong"))
	target.CloseWrite()
	got, err = io.ReadAll(client)
	if err != nil || string(got) != "pong" {
		t.Fatalf("client read %q, %v", got, err)
	}
	<-done
}

func TestCloseWrite(t *testing.T) {
	if CloseWrite(io.Discard) {
		t.Error("CloseWrite(io.Discard) = true")
	}
	c, s := pair(t)
	if !CloseWrite(c) {
		t.Error("CloseWrite(*net.TCPConn) = false")
	}
	if n, err := s.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("read after CloseWrite = %d, %v; want EOF", n, err)
	}
}
