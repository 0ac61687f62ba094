package localbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// TLS in the local box (docs/self-hosting.md). A TLS listener serves the
// same API and sign-in pages as a plaintext one, on any address. ALPN
// picks the side per connection: a client that offers http/1.1 (a browser,
// an HTTP client) gets it and the sign-in pages; one that offers only h2
// (gRPC) gets h2 and the API; one that offers nothing is sniffed as on a
// plaintext listener.

const (
	// selfSignedLife is how long a self-signed certificate is valid.
	selfSignedLife = 825 * 24 * time.Hour
	// renewBefore is how close to its expiry a self-signed certificate is
	// replaced by a new one at start.
	renewBefore = 30 * 24 * time.Hour
)

// SelfSignedPaths are the certificate and key files of the self-signed
// pair of the local box whose state is in dir.
func SelfSignedPaths(dir string) (cert, key string) {
	return filepath.Join(dir, "tls", "self-signed.crt"), filepath.Join(dir, "tls", "self-signed.key")
}

// CertChange is what SelfSigned did to the certificate.
type CertChange int

const (
	// CertKept is a certificate already there, which serves.
	CertKept CertChange = iota
	// CertNew is the first one: there was none.
	CertNew
	// CertReplaced is a new one in place of one that expired soon, did not
	// cover the names or could not be read: clients that pinned the old
	// one must pin this one.
	CertReplaced
)

// SelfSigned makes sure dir holds a self-signed certificate (ECDSA P-256)
// for every name in names (DNS names or IP addresses) that is valid for at
// least 30 more days, making a new pair when not, and returns its paths
// and what it did. The certificate is its own CA: a client trusts it by
// pinning the certificate file itself.
func SelfSigned(dir string, names []string) (cert, key string, change CertChange, err error) {
	cert, key = SelfSignedPaths(dir)
	c, err := tls.LoadX509KeyPair(cert, key)
	if err == nil && c.Leaf != nil && time.Until(c.Leaf.NotAfter) > renewBefore && covers(c.Leaf, names) {
		return cert, key, CertKept, nil
	}
	change = CertReplaced
	if _, err := os.Lstat(cert); errors.Is(err, os.ErrNotExist) {
		change = CertNew
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", CertKept, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return "", "", CertKept, err
	}
	host, _ := os.Hostname()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "cocoonbox local box " + host, Organization: []string{"cocoonbox local box"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedLife),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return "", "", CertKept, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", CertKept, err
	}
	if err := os.MkdirAll(filepath.Dir(cert), 0o700); err != nil {
		return "", "", CertKept, err
	}
	if err := atomicfile.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return "", "", CertKept, err
	}
	if err := atomicfile.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", CertKept, err
	}
	return cert, key, change, nil
}

// covers reports whether c is valid for every name.
func covers(c *x509.Certificate, names []string) bool {
	for _, n := range names {
		if c.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

// SelfSignedNames are the names a self-signed certificate for a listener
// on listenHost covers: localhost, this machine's host name, the loopback
// addresses, the listen address (or, for an unspecified one, every
// address of this machine's interfaces), and extra.
func SelfSignedNames(listenHost string, extra []string) []string {
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, h)
	}
	names = append(names, "127.0.0.1", "::1")
	ip := net.ParseIP(listenHost)
	switch {
	case EveryAddress(listenHost):
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
					names = append(names, n.IP.String())
				}
			}
		}
	case ip != nil:
		names = append(names, ip.String())
	default:
		names = append(names, listenHost)
	}
	names = append(names, extra...)
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// LoadTLS reads a PEM certificate (with its chain) and key for Server.TLS,
// refusing one that has expired or is not yet valid.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	if c.Leaf == nil {
		return nil, fmt.Errorf("TLS certificate %s: no certificate", certFile)
	}
	if len(c.Leaf.DNSNames) == 0 && len(c.Leaf.IPAddresses) == 0 {
		return nil, fmt.Errorf("TLS certificate %s names no host (no DNS or IP subject alternative names), so clients refuse it; make one with its host names", certFile)
	}
	now := time.Now()
	if now.After(c.Leaf.NotAfter) {
		return nil, fmt.Errorf("TLS certificate %s expired on %s; renew it (or use --tls self-signed)", certFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(c.Leaf.NotBefore) {
		return nil, fmt.Errorf("TLS certificate %s is valid only from %s", certFile, c.Leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}, nil
}

// Fingerprint is the SHA-256 of a TLS configuration's first certificate,
// in upper-case hex pairs joined by colons (as browsers and openssl show
// it).
func Fingerprint(c *tls.Config) string {
	if c == nil || len(c.Certificates) == 0 || len(c.Certificates[0].Certificate) == 0 {
		return ""
	}
	sum := sha256.Sum256(c.Certificates[0].Certificate[0])
	var b strings.Builder
	for i, x := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", x)
	}
	return b.String()
}

// CertNames are the DNS names and IP addresses a TLS configuration's
// first certificate is for.
func CertNames(c *tls.Config) []string {
	if c == nil || len(c.Certificates) == 0 || c.Certificates[0].Leaf == nil {
		return nil
	}
	l := c.Certificates[0].Leaf
	out := slices.Clone(l.DNSNames)
	for _, ip := range l.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

// EveryAddress reports whether host, a listen address's HOST, means every
// address of the machine: "", 0.0.0.0 or ::.
func EveryAddress(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// LocalName is the name this machine's own clients reach a server of c
// by when it listens on every address: the first of localhost, 127.0.0.1,
// ::1 and this machine's host name that c's first certificate is for
// (a wildcard may cover the host name), else its first name that is not a
// wildcard, else its first name. A certificate's first name may be one
// that does not resolve here (a public name, "*.example.com").
func LocalName(c *tls.Config) string {
	cands := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil {
		cands = append(cands, h)
	}
	for _, h := range cands {
		if certFor(c, h) {
			return h
		}
	}
	names := CertNames(c)
	for _, n := range names {
		if !strings.HasPrefix(n, "*") {
			return n
		}
	}
	if len(names) > 0 {
		return names[0]
	}
	return "localhost"
}

// certFor reports whether c's first certificate is valid for host.
func certFor(c *tls.Config, host string) bool {
	return len(c.Certificates) > 0 && c.Certificates[0].Leaf != nil && c.Certificates[0].Leaf.VerifyHostname(host) == nil
}

// serverTLS is base with ALPN chosen per client (see the comment at the
// top of this file).
func serverTLS(base *tls.Config) *tls.Config {
	h1, h2 := base.Clone(), base.Clone()
	h1.NextProtos = []string{"http/1.1"}
	h2.NextProtos = []string{"h2"}
	c := base.Clone()
	c.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		if slices.Contains(h.SupportedProtos, "http/1.1") {
			return h1, nil
		}
		return h2, nil
	}
	return c
}

// ListenTLS opens a TCP listener on addr ("HOST:PORT", any address) for a
// Server with TLS set, and returns it with its endpoint URL,
// https://HOST:PORT. For an unspecified HOST (0.0.0.0, [::] or empty) the
// URL names urlHost instead.
func ListenTLS(addr, urlHost string) (net.Listener, string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen address %q: want HOST:PORT", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	if EveryAddress(host) {
		if urlHost == "" {
			urlHost = "localhost"
		}
		host = urlHost
	}
	a := lis.Addr().(*net.TCPAddr)
	return lis, "https://" + net.JoinHostPort(host, fmt.Sprint(a.Port)), nil
}

// errNoCert is returned by Serve for a Server whose TLS has no certificate.
var errNoCert = errors.New("localbox: Server.TLS has no certificate")
