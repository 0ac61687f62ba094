package cork_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/cork"
)

// counted counts the write(2)s that reach the socket, and the read(2)s.
type counted struct {
	net.Conn
	writes, reads atomic.Int64
}

func (c *counted) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func (c *counted) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cork"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"cork"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// pair is a TLS connection over loopback TCP: the client corked, the
// server plain, and the client's socket writes counted.
func pair(t *testing.T) (*cork.Conn, *tls.Conn, *counted) {
	t.Helper()
	var cnt *counted
	c, srv := pairOver(t, func(nc net.Conn) net.Conn {
		cnt = &counted{Conn: nc}
		return cnt
	})
	return c, srv, cnt
}

// pairOver is pair with the client's socket wrapped by wrap.
func pairOver(t *testing.T, wrap func(net.Conn) net.Conn) (*cork.Conn, *tls.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	cert := selfSigned(t)
	accepted := make(chan *tls.Conn, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		s := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		s.Handshake()
		accepted <- s
	}()
	nc, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	raw := cork.Raw(wrap(nc))
	tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: "cork"})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { tc.Close(); srv.Close() })
	return cork.Wrap(tc, raw), srv
}

func TestOneWritePerCall(t *testing.T) {
	c, srv, cnt := pair(t)
	data := make([]byte, 200<<10) // 13 records of at most 16 KiB
	rand.Read(data)
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(data))
		io.ReadFull(srv, b)
		got <- b
	}()
	before := cnt.writes.Load()
	if n, err := c.Write(data); err != nil || n != len(data) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if w := cnt.writes.Load() - before; w != 1 {
		t.Errorf("a Write of %d bytes made %d socket writes, want 1", len(data), w)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Error("the server read other bytes than were written")
	}
}

// A small write is not held after its Write returns, and reads through the
// buffer under TLS see every byte.
func TestSmallWriteArrivesAndReadsBuffered(t *testing.T) {
	c, srv, _ := pair(t)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 4)
	if _, err := io.ReadFull(srv, b); err != nil || string(b) != "ping" {
		t.Fatalf("server read %q, %v", b, err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	go srv.Write(want)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("client read %d bytes that differ, %v", len(got), err)
	}
}

// After a write that failed (here a deadline that passed while the peer
// read nothing), every later write fails, as crypto/tls's do: records
// written after a lost or torn one would reach the peer as garbage.
func TestWriteErrorIsSticky(t *testing.T) {
	c, srv, _ := pair(t)
	chunk := make([]byte, 64<<10)
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	var err error
	for err == nil {
		_, err = c.Write(chunk)
	}
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("Write to a peer that reads nothing = %v, want a timeout", err)
	}
	c.SetWriteDeadline(time.Time{})
	go io.Copy(io.Discard, srv)
	if _, err := c.Write([]byte("after")); err == nil {
		t.Fatal("a Write after a failed one succeeded, its records behind a torn one")
	}
}

// deafToDeadlines is a connection whose write deadlines do nothing: what
// bounds crypto/tls's close_notify on a blocked socket (a deadline of
// 5 s) is gone, so that waiting behind a blocked write shows as a hang.
type deafToDeadlines struct{ net.Conn }

func (deafToDeadlines) SetWriteDeadline(time.Time) error { return nil }

// Close unblocks a Write blocked on a peer that reads nothing (net.Conn's
// contract), as crypto/tls's Close does, even when the Write is blocked
// writing what it held, outside tls.Conn.Write: it must not wait to send
// close_notify behind it (with a real socket it waited the 5 s crypto/tls
// gives close_notify; gRPC's keepalive closes connections to frozen peers).
func TestCloseUnblocksWrite(t *testing.T) {
	c, _ := pairOver(t, func(nc net.Conn) net.Conn { return deafToDeadlines{nc} })
	// Writes below the flush size, so that the one that blocks does in
	// the uncork; the server reads nothing.
	var written atomic.Int64
	done := make(chan error, 1)
	go func() {
		chunk := make([]byte, 100<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				done <- err
				return
			}
			written.Add(1)
		}
	}()
	for last := int64(-1); ; time.Sleep(100 * time.Millisecond) {
		if n := written.Load(); n == last {
			break
		} else {
			last = n
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close hung behind a blocked Write")
	}
	if err := <-done; err == nil {
		t.Fatal("the blocked Write returned no error")
	}
}

// An unbuffered RawConn reads straight from its connection, one read(2)
// per Read, until Buffer; from then on through the buffer, and no byte is
// lost or repeated across the switch.
func TestRawUnbufferedThenBuffered(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	under := &counted{Conn: b}
	raw := cork.RawUnbuffered(under)
	go func() {
		a.Write([]byte("hello"))
		a.Write([]byte(" world"))
	}()
	got := make([]byte, 0, 11)
	p := make([]byte, 2)
	for len(got) < 4 {
		n, err := raw.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
	}
	if n := under.reads.Load(); n != 2 {
		t.Errorf("unbuffered: %d reads below for 4 bytes read 2 at a time; want 2", n)
	}
	raw.Buffer()
	p = p[:1]
	for len(got) < 11 {
		n, err := raw.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
	}
	if string(got) != "hello world" {
		t.Errorf("read %q; want %q", got, "hello world")
	}
	// The rest of the first write and the second: two reads below.
	if n := under.reads.Load() - 2; n != 2 {
		t.Errorf("buffered: %d reads below for 7 bytes read 1 at a time; want 2", n)
	}
}
