package cli_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// The TLS path in the scripts (testdata/script/README): a test CA made
// here, scripts named *_tls served over https://127.0.0.1:PORT with a
// certificate it signs, and the mkcert and tlsbox commands for the
// certificates a client must refuse.

// testCA is a CA made for one test run.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// file is the CA's certificate, PEM.
	file string
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cocoonbox test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, file: file}
}

// issue writes a server certificate for names, valid from notBefore to
// notAfter, and its key, to certFile and keyFile. It returns the
// base64 SHA-256 of its public key (chromium's SPKI pin).
func (ca *testCA) issue(certFile, keyFile string, names []string, notBefore, notAfter time.Time) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return "", err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return "", err
	}
	spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(spki)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// tlsServer is the TLS configuration for a script's local box: a
// certificate for 127.0.0.1 signed by ca, written into work. It sets the
// script's COCOONBOX_CA_FILE to the CA, and TLS_SPKI to the certificate's
// key pin for the browser.
func (ca *testCA) tlsServer(e *testscript.Env) (*tls.Config, error) {
	cert, key := filepath.Join(e.WorkDir, ".box.crt"), filepath.Join(e.WorkDir, ".box.key")
	spki, err := ca.issue(cert, key, []string{"127.0.0.1"}, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		return nil, err
	}
	tc, err := localbox.LoadTLS(cert, key)
	if err != nil {
		return nil, err
	}
	e.Setenv("COCOONBOX_CA_FILE", ca.file)
	e.Setenv("TLS_SPKI", spki)
	return tc, nil
}

// mkcert [-expired] [-name NAME]... CERT KEY writes a server certificate
// signed by the test CA (for 127.0.0.1 unless names are given), and its key.
func (ca *testCA) mkcert(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("mkcert", flag.ContinueOnError)
	expired := fs.Bool("expired", false, "valid until an hour ago")
	var names []string
	fs.Func("name", "a DNS name or IP address", func(s string) error { names = append(names, s); return nil })
	if neg || fs.Parse(args) != nil || fs.NArg() != 2 {
		ts.Fatalf("usage: mkcert [-expired] [-name NAME]... CERT KEY")
	}
	if len(names) == 0 {
		names = []string{"127.0.0.1"}
	}
	from, until := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if *expired {
		from, until = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	}
	_, err := ca.issue(ts.MkAbs(fs.Arg(0)), ts.MkAbs(fs.Arg(1)), names, from, until)
	ts.Check(err)
}

// tlsbox VAR CERT KEY serves a second, empty local box over TLS with
// CERT and KEY as they are (expired or not) on 127.0.0.1 until the script
// ends, and sets $VAR to its endpoint, $VAR_PORT to its port and
// $COCOONBOX_TOKEN to a token it accepts.
func tlsbox(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: tlsbox VAR CERT KEY")
	}
	c, err := tls.LoadX509KeyPair(ts.MkAbs(args[1]), ts.MkAbs(args[2]))
	ts.Check(err)
	dir, err := os.MkdirTemp(ts.Getenv("WORK"), ".tlsbox-")
	ts.Check(err)
	srv := &localbox.Server{Dir: dir, TLS: &tls.Config{Certificates: []tls.Certificate{c}}}
	lis, url, err := localbox.ListenTLS("127.0.0.1:0", "")
	ts.Check(err)
	tok, err := localbox.IssueToken(dir, "test", "cli")
	ts.Check(err)
	go srv.Serve(lis)
	ts.Defer(srv.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	ts.Setenv(args[0], url)
	ts.Setenv(args[0]+"_PORT", port)
	ts.Setenv("COCOONBOX_TOKEN", tok)
}
