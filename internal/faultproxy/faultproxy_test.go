package faultproxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/faultproxy"
)

// echo serves an echo on a loopback port until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return lis.Addr().String()
}

func start(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Listen("127.0.0.1:0", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *faultproxy.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back.
func roundTrip(c net.Conn, msg string) error {
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != msg {
		return errors.New("echo: " + string(got))
	}
	return nil
}

// isReset reports whether err is a reset (or a write into one).
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Bytes pass both ways, byte-exact, and a half-close passes through.
func TestForward(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	big := bytes.Repeat([]byte("0123456789"), 1<<18)
	go func() {
		c.Write(big)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("echo of %d bytes: %d bytes, %v", len(big), len(got), err)
	}
	if s := p.Stats(); s.Accepted != 1 || s.Resets != 0 {
		t.Errorf("stats %+v", s)
	}
}

// ResetEvery resets a link that old, both ends, and the next connection
// works until it is that old too.
func TestResetEvery(t *testing.T) {
	p := start(t)
	p.ResetEvery(300 * time.Millisecond)
	for i := 0; i < 2; i++ {
		c := dial(t, p)
		if err := roundTrip(c, "hello"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		_, err := c.Read(make([]byte, 1))
		if !isReset(err) {
			t.Fatalf("connection %d: read %v, want a reset", i, err)
		}
	}
	if s := p.Stats(); s.Resets != 2 {
		t.Errorf("stats %+v, want 2 resets", s)
	}
}

// Freeze moves nothing either way and closes nothing; Thaw delivers what
// waited.
func TestFreeze(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if err := roundTrip(c, "before"); err != nil {
		t.Fatal(err)
	}
	p.Freeze(time.Hour)
	c.Write([]byte("during"))
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.Read(make([]byte, 16))
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("frozen link: read %d, %v; want nothing", n, err)
	}
	// A new connection waits too.
	c2 := dial(t, p)
	c2.Write([]byte("new"))
	p.Thaw()
	c.SetReadDeadline(time.Time{})
	got := make([]byte, 6)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "during" {
		t.Fatalf("after thaw: %q, %v", got, err)
	}
	got = make([]byte, 3)
	if _, err := io.ReadFull(c2, got); err != nil || string(got) != "new" {
		t.Fatalf("new connection after thaw: %q, %v", got, err)
	}
}

// Outage resets the open links and every connection that comes while it
// lasts; after it, connections work again.
func TestOutage(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if err := roundTrip(c, "x"); err != nil {
		t.Fatal(err)
	}
	p.Outage(time.Second)
	if _, err := c.Read(make([]byte, 1)); !isReset(err) {
		t.Fatalf("open link: %v, want a reset", err)
	}
	refused, err := net.Dial("tcp", p.Addr())
	if err == nil {
		err = roundTrip(refused, "y")
		refused.Close()
	}
	if !isReset(err) && !errors.Is(err, io.EOF) {
		t.Fatalf("during the outage: %v, want a reset", err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.Dial("tcp", p.Addr())
		if err == nil {
			err = roundTrip(c, "z")
			c.Close()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the outage: %v", err)
		}
	}
	if s := p.Stats(); s.Resets < 2 {
		t.Errorf("stats %+v", s)
	}
}
