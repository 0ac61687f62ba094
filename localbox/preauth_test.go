package localbox_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cocoonbox/cocoonbox/localbox"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// startTLS serves srv, with Dir and TLS filled in, on a TLS port of
// 127.0.0.1 and returns its host:port and certificate file.
func startTLS(t *testing.T, srv *localbox.Server) (string, string) {
	t.Helper()
	srv.Dir = t.TempDir()
	cert, key, _, err := localbox.SelfSigned(srv.Dir, []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if srv.TLS, err = localbox.LoadTLS(cert, key); err != nil {
		t.Fatal(err)
	}
	lis, _, err := localbox.ListenTLS("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	run(t, srv, lis)
	return lis.Addr().String(), cert
}

// dialTLS makes a TLS connection to addr offering proto by ALPN.
func dialTLS(t *testing.T, addr, certFile, proto string) *tls.Conn {
	t.Helper()
	tc := trusting(t, certFile)
	tc.NextProtos = []string{proto}
	c, err := tls.Dial("tcp", addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// h2Preface is what a gRPC client sends first: the HTTP/2 preface and an
// empty SETTINGS frame, after which the server has a transport for it.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// closedWithin reads c until it fails, and reports whether that was the
// peer closing it (not the deadline d).
func closedWithin(c net.Conn, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return fmt.Errorf("still open after %v", d)
		}
		return nil
	}
}

// grpcClient is a gRPC connection to addr over TLS, with tok as its
// bearer when not empty.
func grpcClient(t *testing.T, addr, certFile string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(trusting(t, certFile))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func bearer(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// bindable reports whether this machine has the loopback address ip (Linux
// has all of 127.0.0.0/8; macOS only 127.0.0.1).
// needLoopback makes sure this machine has the loopback address ip: on
// Linux, which routes all of 127/8 to loopback, its lack fails the test;
// elsewhere (macOS has 127.0.0.1 alone unless aliased) it skips.
func needLoopback(t *testing.T, ip string) {
	t.Helper()
	if bindable(ip) {
		return
	}
	if runtime.GOOS == "linux" {
		t.Fatalf("the loopback address %s is not bindable: Linux routes all of 127/8 to loopback", ip)
	}
	t.Skipf("no loopback address %s here", ip)
}

func bindable(ip string) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// A connection that has carried no call with a valid token is closed
// once it has sent nothing for AnonIdle: one that never starts its TLS
// handshake, one silent after its HTTP/2 preface (which nothing else
// would close), a sign-in page's kept-alive connection, and a gRPC
// connection whose call had a wrong token. One on which a call had a
// valid token stays.
func TestAnonIdle(t *testing.T) {
	const idle = 300 * time.Millisecond
	// Well below the 10 s the sniffer gives a handshake, and the 2 min
	// of net/http's IdleTimeout, so only AnonIdle can pass.
	const within = 5 * time.Second
	srv := &localbox.Server{Logf: t.Logf, AnonIdle: idle}
	addr, cert := startTLS(t, srv)
	tok, err := localbox.IssueToken(srv.Dir, "t", "cli")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("no handshake", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := closedWithin(c, within); err != nil {
			t.Error(err)
		}
	})

	t.Run("silent after the preface", func(t *testing.T) {
		c := dialTLS(t, addr, cert, "h2")
		if _, err := c.Write([]byte(h2Preface)); err != nil {
			t.Fatal(err)
		}
		if err := closedWithin(c, within); err != nil {
			t.Error(err)
		}
	})

	t.Run("sign-in page kept alive", func(t *testing.T) {
		c := dialTLS(t, addr, cert, "http/1.1")
		fmt.Fprintf(c, "GET /.well-known/oauth-authorization-server HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("metadata: %s, close %v; want 200 kept alive", resp.Status, resp.Close)
		}
		if err := closedWithin(c, within); err != nil {
			t.Error(err)
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		cc := grpcClient(t, addr, cert)
		_, err := controlv1.NewBoxesClient(cc).List(bearer(t.Context(), "cb_"+strings.Repeat("0", 64)), &controlv1.ListRequest{})
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("List with a wrong token: %v", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), within)
		defer cancel()
		if s := cc.GetState(); s == connectivity.Ready && !cc.WaitForStateChange(ctx, s) {
			t.Errorf("still %v after %v", s, within)
		}
	})

	t.Run("valid token", func(t *testing.T) {
		cc := grpcClient(t, addr, cert)
		boxes := controlv1.NewBoxesClient(cc)
		if _, err := boxes.List(bearer(t.Context(), tok), &controlv1.ListRequest{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * idle)
		if s := cc.GetState(); s != connectivity.Ready {
			t.Fatalf("after %v: %v; want the connection kept", 5*idle, s)
		}
		if _, err := boxes.List(bearer(t.Context(), tok), &controlv1.ListRequest{}); err != nil {
			t.Fatal(err)
		}
	})
}

// sessionFrom posts code to the sign-in route from the address local
// (nil: any) and returns the status, the Retry-After header and the error
// description.
func sessionFrom(t *testing.T, base string, local net.Addr, code string) (int, string, string) {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: local}).DialContext}
	defer tr.CloseIdleConnections()
	b, _ := json.Marshal(map[string]string{"code": code})
	req, _ := http.NewRequest(http.MethodPost, base+"/cb/api/session", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Description string `json:"error_description"`
	}
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, resp.Header.Get("Retry-After"), m.Description
}

// Wrong sign-in codes are limited per source: after five, a source gets
// 429 with one line saying when to try again, even for the right code
// (another source signs in with it: TestAccountCodeUnderGuessLimit, and
// another user of this machine: TestSignInGuessLimitByUser). All of one
// user's loopback is one source. No number of wrong codes, from one address
// or many, changes the owner's code.
func TestSignInGuessLimit(t *testing.T) {
	base, dir := serve(t)
	code, _ := localbox.SignInCode(dir)
	for i := range 5 {
		if st, _, d := sessionFrom(t, base, nil, "AAAAA-AAAAA"); st != http.StatusUnauthorized {
			t.Fatalf("wrong code %d: %d %q; want 401", i+1, st, d)
		}
	}
	for _, try := range []string{"AAAAA-AAAAA", code} {
		st, after, d := sessionFrom(t, base, nil, try)
		secs, err := strconv.Atoi(after)
		if st != http.StatusTooManyRequests || err != nil || secs < 1 || secs > 300 {
			t.Fatalf("past the limit: %d, Retry-After %q; want 429 and 1-300 s", st, after)
		}
		if want := "try again in " + after + " seconds"; !strings.Contains(d, want) || strings.Contains(d, "\n") {
			t.Errorf("past the limit: %q; want one line with %q", d, want)
		}
	}
	for range 50 {
		sessionFrom(t, base, nil, "AAAAA-AAAAA")
	}
	if after, _ := localbox.SignInCode(dir); after != code {
		t.Fatalf("wrong codes from one source changed the code: %s, then %s", code, after)
	}
	// Every address of 127/8 is this machine, and one source: a local
	// user (a box's) gets no more guesses by changing its address.
	needLoopback(t, "127.0.0.2")
	for i := 2; i < 22; i++ {
		from := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(i))}
		if st, _, d := sessionFrom(t, base, from, "AAAAA-AAAAA"); st != http.StatusTooManyRequests {
			t.Fatalf("a wrong code from %v once 127.0.0.1 had guessed 5 times: %d %q; want 429", from.IP, st, d)
		}
	}
	if after, _ := localbox.SignInCode(dir); after != code {
		t.Fatalf("wrong codes from 20 addresses changed the code: %s, then %s", code, after)
	}
}

// A call without a token is refused at its headers, before any of its
// message is read: gRPC reads a unary call's request whole before the
// interceptors run, so a connection with no token could otherwise open
// stream after stream, each holding an unfinished 4 MiB request in the
// server's memory (one such connection held 1.2 GiB in 6 s).
func TestNoTokenRefusedAtHeaders(t *testing.T) {
	u, _ := serve(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(u, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// HPACK literal fields without indexing, no Huffman coding.
	var hb []byte
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/cocoonbox.control.v1.Boxes/List"},
		{":authority", "127.0.0.1"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		hb = append(hb, 0, byte(len(f[0])))
		hb = append(hb, f[0]...)
		hb = append(hb, byte(len(f[1])))
		hb = append(hb, f[1]...)
	}
	frame := func(typ, flags byte, payload []byte) []byte {
		n := len(payload)
		return append([]byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, 0, 0, 0, 1}, payload...)
	}
	// The request's length prefix says 1 MiB; 1,000 bytes of it come.
	msg := append([]byte{0, 0, 0x10, 0, 0}, make([]byte, 1000)...)
	out := []byte(h2Preface)
	out = append(out, frame(1, 4, hb)...)  // HEADERS, END_HEADERS, stream 1
	out = append(out, frame(0, 0, msg)...) // DATA, stream 1
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	br := bufio.NewReader(c)
	for {
		var h [9]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("no answer on the stream while its request is unfinished: %v", err)
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		if _, err := br.Discard(n); err != nil {
			t.Fatal(err)
		}
		if h[3] == 1 && h[8] == 1 { // HEADERS of stream 1: refused
			return
		}
	}
}
