package box

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/cork"
)

// How a client trusts an https endpoint (docs/self-hosting.md): the CAs in
// $COCOONBOX_CA_FILE if set, else the CA pinned for that endpoint in the
// configuration directory (ca/HOST_PORT.pem, written by PinCA), else the
// system's roots (on Linux, $SSL_CERT_FILE and $SSL_CERT_DIR name them).
// A pinned or named CA replaces the system's roots for that endpoint.

// caPath is the pin of ep's CA under the configuration directory dir.
func caPath(dir string, ep Endpoint) string {
	name := strings.NewReplacer(":", "_", "[", "", "]", "").Replace(ep.Target)
	return filepath.Join(dir, "ca", name+".pem")
}

// WithCA returns ep with CAFile set for an https endpoint: $COCOONBOX_CA_FILE
// when set, else the CA pinned for ep under the configuration directory
// when there is one, else "" (the system's roots). getenv reads the
// environment.
func WithCA(ep Endpoint, getenv func(string) string) Endpoint {
	if !ep.TLS {
		return ep
	}
	if f := getenv("COCOONBOX_CA_FILE"); f != "" {
		ep.CAFile, ep.CAFromEnv = f, true
		return ep
	}
	if dir, err := ConfigDir(getenv); err == nil {
		if p := caPath(dir, ep); fileExists(p) {
			ep.CAFile = p
		}
	}
	return ep
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// PinCA checks that the PEM data b holds at least one certificate and
// saves its CERTIFICATE blocks, and nothing else of it (a key that came
// in the same file), as the CA of ep under the configuration directory
// dir (0600), so that WithCA finds it. It returns the path written.
func PinCA(dir string, ep Endpoint, b []byte) (string, error) {
	if !ep.TLS {
		return "", fmt.Errorf("%s is not an https endpoint; only those take a CA", ep.URL)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return "", errors.New("the CA file holds no PEM certificate (want -----BEGIN CERTIFICATE-----)")
	}
	var certs []byte
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			certs = append(certs, pem.EncodeToMemory(&pem.Block{Type: blk.Type, Bytes: blk.Bytes})...)
		}
	}
	b = certs
	p := caPath(dir, ep)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	return p, atomicfile.WriteFile(p, b, 0o600)
}

// TLSConfig is the client TLS configuration for ep: TLS 1.2 or later,
// with the roots that CAFile names, else the system's.
func TLSConfig(ep Endpoint) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ep.CAFile != "" {
		b, err := os.ReadFile(ep.CAFile)
		if err != nil {
			if ep.CAFromEnv {
				return nil, fmt.Errorf("the CA for %s, COCOONBOX_CA_FILE: %w; point the variable at the server's CA, or unset it", ep.URL, err)
			}
			return nil, fmt.Errorf("the CA for %s: %w", ep.URL, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("the CA for %s: %s holds no PEM certificate", ep.URL, ep.caName())
		}
		c.RootCAs = pool
	}
	return c, nil
}

// HTTPClient is an HTTP client for ep's sign-in pages and token endpoint
// that trusts what Dial trusts, with the given overall timeout. Its TLS
// errors read like Dial's (see TLSError).
func HTTPClient(ep Endpoint, timeout time.Duration) (*http.Client, error) {
	tc, err := TLSConfig(ep)
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tc
	return &http.Client{Timeout: timeout, Transport: explainedTransport{t, ep}}, nil
}

// explainedTransport turns a certificate failure into TLSError's one line.
type explainedTransport struct {
	rt http.RoundTripper
	ep Endpoint
}

func (e explainedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.rt.RoundTrip(r)
	if err != nil {
		if te := TLSError(e.ep, err); te != nil {
			return nil, te
		}
	}
	return resp, err
}

// TLSError returns the one-line error, naming the fix, for a certificate
// that err (from a handshake with ep) says is untrusted, expired or for
// another name; nil when err is no such failure.
func TLSError(ep Endpoint, err error) error {
	var (
		ua  x509.UnknownAuthorityError
		inv x509.CertificateInvalidError
		hn  x509.HostnameError
	)
	fix := "trust its CA with `cocoonbox login --endpoint " + ep.URL + " --ca FILE` or COCOONBOX_CA_FILE=FILE (docs/self-hosting.md)"
	switch {
	case ep.CAFromEnv:
		fix = "this computer trusts only " + ep.caName() + " for it; point the variable at the server's CA, or unset it (docs/self-hosting.md)"
	case ep.CAFile != "":
		fix = "this computer trusts only " + ep.caName() + " for it; if the server's certificate changed (a self-signed one made anew), pin the new one: `cocoonbox login --endpoint " + ep.URL + " --ca FILE` (docs/self-hosting.md)"
	}
	switch {
	case errors.As(err, &ua):
		return &CertError{fmt.Sprintf("%s: its certificate is not signed by a CA this computer trusts; %s", ep.URL, fix)}
	case errors.As(err, &inv) && inv.Reason == x509.Expired:
		when := ""
		if inv.Cert != nil {
			now := time.Now()
			if now.Before(inv.Cert.NotBefore) {
				return &CertError{fmt.Sprintf("%s: its certificate is valid only from %s; check this computer's clock, or the server's certificate", ep.URL, inv.Cert.NotBefore.UTC().Format(time.RFC3339))}
			}
			when = " on " + inv.Cert.NotAfter.UTC().Format(time.RFC3339)
		}
		return &CertError{fmt.Sprintf("%s: its certificate expired%s; the server must renew it (cocoonbox localbox start --tls self-signed makes a new one; docs/self-hosting.md)", ep.URL, when)}
	case errors.As(err, &hn):
		names := "no name"
		if hn.Certificate != nil {
			var all []string
			all = append(all, hn.Certificate.DNSNames...)
			for _, ip := range hn.Certificate.IPAddresses {
				all = append(all, ip.String())
			}
			if len(all) > 0 {
				names = strings.Join(all, ", ")
			}
		}
		return &CertError{fmt.Sprintf("%s: its certificate is for %s, not %s; use one of those names in the endpoint, or give the server a certificate with this one (--tls-name with --tls self-signed; else a new certificate)", ep.URL, names, hn.Host)}
	case errors.As(err, &inv):
		return &CertError{fmt.Sprintf("%s: its certificate is not valid here (%v); %s", ep.URL, inv, fix)}
	}
	return nil
}

// CertError is a refused server certificate: one line that names the fix.
type CertError struct{ msg string }

func (e *CertError) Error() string { return e.msg }

// explainedCreds is gRPC's TLS credentials, keeping the last certificate
// failure so that the client can report it in one line: gRPC passes on
// only its text, wrapped in its own.
type explainedCreds struct {
	credentials.TransportCredentials
	ep   Endpoint
	last *atomic.Pointer[CertError]
}

func (c explainedCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, conn)
	var ce *CertError
	if err != nil && errors.As(TLSError(c.ep, err), &ce) {
		c.last.Store(ce)
	} else {
		c.last.Store(nil)
	}
	return nc, info, err
}

func (c explainedCreds) Clone() credentials.TransportCredentials {
	return explainedCreds{c.TransportCredentials.Clone(), c.ep, c.last}
}

// corkCreds makes TLS over a cork.RawConn, so that each write of gRPC's is
// one write(2) and not one per record.
type corkCreds struct {
	credentials.TransportCredentials
}

func (c corkCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	raw := cork.Raw(conn)
	nc, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nc, info, err
	}
	return cork.Wrap(nc, raw), info, nil
}

func (c corkCreds) Clone() credentials.TransportCredentials {
	return corkCreds{c.TransportCredentials.Clone()}
}

// tlsProbeTimeout bounds PlainToTLS's handshake: it runs only after a
// plaintext call has already failed.
const tlsProbeTimeout = 2 * time.Second

// PlainToTLS is, for an http:// endpoint, the line that says it serves
// TLS, when a TLS handshake with its host:port gets as far as the
// server's certificate (trusted or not): a plaintext HTTP/2 client reads
// only EOF or a reset from a TLS server, which would otherwise be all it
// says. ""
// for any other endpoint, or when no TLS server answers there. No token
// or request is sent.
func PlainToTLS(ep Endpoint) string {
	if ep.TLS || !strings.HasPrefix(ep.URL, "http://") {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), tlsProbeTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", ep.Target)
	if err != nil {
		return ""
	}
	defer conn.Close()
	host, _, _ := net.SplitHostPort(ep.Target)
	tc := tls.Client(conn, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12})
	err = tc.HandshakeContext(ctx)
	var verr *tls.CertificateVerificationError
	if err != nil && !errors.As(err, &verr) {
		return ""
	}
	return fmt.Sprintf("%s serves TLS (https), not plain http: use https://%s", ep.URL, strings.TrimPrefix(ep.URL, "http://"))
}
