package localbox_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// serveTLS serves a local box over TLS with a self-signed certificate for
// 127.0.0.1 and returns its endpoint, state directory and the certificate
// file.
func serveTLS(t *testing.T) (string, string, string) {
	t.Helper()
	dir := t.TempDir()
	cert, key, ch, err := localbox.SelfSigned(dir, []string{"127.0.0.1", "localhost"})
	if err != nil || ch != localbox.CertNew {
		t.Fatalf("SelfSigned: %v, %v; want CertNew", ch, err)
	}
	tc, err := localbox.LoadTLS(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := &localbox.Server{Dir: dir, TLS: tc}
	lis, url, err := localbox.ListenTLS("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return url, dir, cert
}

func trusting(t *testing.T, certFile string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return &tls.Config{RootCAs: pool}
}

// One TLS port: gRPC (ALPN h2 only) reaches the API; an HTTP client
// offering h2 and http/1.1, as browsers do, gets the pages over HTTP/1.1;
// a TLS client offering no ALPN is sniffed; a Host not in the certificate
// is refused.
func TestTLSSplitsByALPN(t *testing.T) {
	url, dir, cert := serveTLS(t)
	tok, _ := localbox.IssueToken(dir, "t", "cli")
	ep, err := box.ParseEndpoint(url)
	if err != nil {
		t.Fatal(err)
	}
	ep.CAFile = cert
	c, err := box.Dial(ep, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.List(t.Context()); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}

	tr := &http.Transport{TLSClientConfig: trusting(t, cert), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct{ Issuer string }
	json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" || meta.Issuer != url {
		t.Errorf("pages: %s %s, issuer %q; want 200 over HTTP/1.1, issuer %s", resp.Proto, resp.Status, meta.Issuer, url)
	}

	host := strings.TrimPrefix(url, "https://")
	for _, h := range []string{host, strings.Replace(host, "127.0.0.1", "evil.example", 1)} {
		conn, err := tls.Dial("tcp", host, trusting(t, cert))
		if err != nil {
			t.Fatal(err)
		}
		if p := conn.ConnectionState().NegotiatedProtocol; p != "" {
			t.Errorf("no ALPN offered, %q negotiated", p)
		}
		fmt.Fprintf(conn, "GET /.well-known/oauth-authorization-server HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", h)
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		want := "HTTP/1.1 200"
		if h != host {
			want = "HTTP/1.1 421"
		}
		if !strings.HasPrefix(line, want) {
			t.Errorf("Host %s without ALPN: %q, %v; want %s", h, line, err, want)
		}
	}
}

// SelfSigned makes the first certificate, keeps it while it covers the
// names asked for, and replaces it for a new name.
func TestSelfSignedKept(t *testing.T) {
	dir := t.TempDir()
	fp := func() string {
		cert, key := localbox.SelfSignedPaths(dir)
		tc, err := localbox.LoadTLS(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return localbox.Fingerprint(tc)
	}
	if _, _, ch, err := localbox.SelfSigned(dir, []string{"localhost", "127.0.0.1"}); err != nil || ch != localbox.CertNew {
		t.Fatalf("first: %v, %v; want CertNew", ch, err)
	}
	first := fp()
	if _, _, ch, err := localbox.SelfSigned(dir, []string{"127.0.0.1"}); err != nil || ch != localbox.CertKept {
		t.Fatalf("again, fewer names: %v, %v; want CertKept", ch, err)
	}
	if fp() != first {
		t.Error("the fingerprint changed though the certificate was kept")
	}
	if _, _, ch, err := localbox.SelfSigned(dir, []string{"box.example"}); err != nil || ch != localbox.CertReplaced {
		t.Fatalf("a new name: %v, %v; want CertReplaced", ch, err)
	}
	if fp() == first {
		t.Error("a new certificate has the old fingerprint")
	}
	_, key := localbox.SelfSignedPaths(dir)
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key's mode: %v, %v; want 0600", fi.Mode(), err)
	}
}

// The name this machine's clients use for a server on every address: a
// loopback name the certificate is for comes before its first name, which
// may be a wildcard or a public name that does not resolve here (the break
// test: start waited 15 s on https://*.example.test:PORT and gave up).
func TestLocalName(t *testing.T) {
	host, _ := os.Hostname()
	for _, tt := range []struct {
		names []string
		want  string
	}{
		{[]string{"*.example.test", "localhost", "127.0.0.1"}, "localhost"},
		{[]string{"box.invalid", "127.0.0.1"}, "127.0.0.1"},
		{[]string{"*." + host, host}, host},
		{[]string{"*.example.test", "box.example.test"}, "box.example.test"},
		{[]string{"*.example.test"}, "*.example.test"},
	} {
		tc := &tls.Config{Certificates: []tls.Certificate{{Leaf: leafFor(tt.names)}}}
		if got := localbox.LocalName(tc); got != tt.want {
			t.Errorf("LocalName(%q) = %q, want %q", tt.names, got, tt.want)
		}
	}
}

// leafFor is a certificate for names (DNS names and IP addresses), as
// LocalName reads it: its subject alternative names alone.
func leafFor(names []string) *x509.Certificate {
	c := &x509.Certificate{}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			c.IPAddresses = append(c.IPAddresses, ip)
		} else {
			c.DNSNames = append(c.DNSNames, n)
		}
	}
	return c
}
