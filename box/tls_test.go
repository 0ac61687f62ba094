package box

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testPEM is a PEM certificate made for the test.
func testPEM(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// The CA for an https endpoint: COCOONBOX_CA_FILE, else its pin, else none
// (the system's roots); plaintext endpoints take none.
func TestWithCA(t *testing.T) {
	cfg := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": cfg}
	getenv := func(k string) string { return env[k] }
	ep, _ := ParseEndpoint("https://box.example:7300")
	if got := WithCA(ep, getenv).CAFile; got != "" {
		t.Errorf("nothing pinned: CAFile %q", got)
	}
	if _, err := PinCA(filepath.Join(cfg, "cocoonbox"), ep, []byte("not a certificate")); err == nil {
		t.Error("PinCA took a file with no certificate")
	}
	// A file that holds a key beside the certificate: the key is not copied.
	ca := testPEM(t)
	withKey := append(append([]byte{}, ca...), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("secret")})...)
	p, err := PinCA(filepath.Join(cfg, "cocoonbox"), ep, withKey)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("pin %s: %v, %v", p, fi, err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, ca) {
		t.Errorf("pin holds %q, want the certificate alone", b)
	}
	if got := WithCA(ep, getenv).CAFile; got != p {
		t.Errorf("pinned: CAFile %q, want %q", got, p)
	}
	other, _ := ParseEndpoint("https://box.example:7301")
	if got := WithCA(other, getenv).CAFile; got != "" {
		t.Errorf("another port: CAFile %q, want none", got)
	}
	env["COCOONBOX_CA_FILE"] = "/ca.pem"
	if got := WithCA(ep, getenv).CAFile; got != "/ca.pem" {
		t.Errorf("COCOONBOX_CA_FILE set: CAFile %q", got)
	}
	plain, _ := ParseEndpoint("http://127.0.0.1:7300")
	if got := WithCA(plain, getenv).CAFile; got != "" {
		t.Errorf("http: CAFile %q", got)
	}
	if _, err := PinCA(cfg, plain, testPEM(t)); err == nil {
		t.Error("PinCA pinned a CA for an http endpoint")
	}
}
