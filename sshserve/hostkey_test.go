package sshserve

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestHostKeyCreatedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	k1, err := HostKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k1.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Errorf("key type %s", k1.PublicKey().Type())
	}
	fi, err := os.Stat(filepath.Join(dir, HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", fi.Mode().Perm())
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v, mode %04o; want 0700", err, di.Mode().Perm())
	}
	k2, err := HostKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1.PublicKey().Marshal(), k2.PublicKey().Marshal()) {
		t.Error("a second call made a new key")
	}
}

// Processes starting at once (ControlMaster off, several ssh at a time) all
// get the one key that was kept, never one that was replaced.
func TestHostKeyConcurrentFirstUse(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	keys := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k, err := HostKey(dir)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = k.PublicKey().Marshal()
		})
	}
	wg.Wait()
	for i := range keys {
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("call %d got another key than call 0", i)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("left in the directory: %v; want only %s", entries, HostKeyFile)
	}
}

func TestHostKeyRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, HostKeyFile)
	if _, err := HostKey(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := HostKey(dir); err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Errorf("a key readable by others: %v; want the chmod to run", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := HostKey(dir); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("a broken key file: %v; want the fix", err)
	}

	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(ec, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := HostKey(dir); err == nil || !strings.Contains(err.Error(), "not ed25519") {
		t.Errorf("an ECDSA key: %v; want it refused", err)
	}
}

func TestKnownHostsLine(t *testing.T) {
	k, err := HostKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	line := KnownHostsLine("*.cocoonbox", k.PublicKey())
	want := "*.cocoonbox " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.PublicKey())))
	if line != want {
		t.Errorf("line %q, want %q", line, want)
	}
	// It parses back as known_hosts does.
	_, hosts, pub, _, _, err := ssh.ParseKnownHosts([]byte(line + "\n"))
	if err != nil || len(hosts) != 1 || hosts[0] != "*.cocoonbox" || !bytes.Equal(pub.Marshal(), k.PublicKey().Marshal()) {
		t.Errorf("ParseKnownHosts: %v %q", err, hosts)
	}
}
