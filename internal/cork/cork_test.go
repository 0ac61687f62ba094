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

// counted counts the write(2)s that reach the socket.
type counted struct {
	net.Conn
	writes atomic.Int64
}

func (c *counted) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
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
	cnt := &counted{Conn: nc}
	raw := cork.Raw(cnt)
	tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: "cork"})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { tc.Close(); srv.Close() })
	return cork.Wrap(tc, raw), srv, cnt
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
