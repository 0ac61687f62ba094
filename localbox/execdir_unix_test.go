//go:build unix

package localbox

import (
	"os"
	"path/filepath"
	"testing"
)

// A link planted where the exec server's directories go is refused, and
// neither made nor chmod'ed through: root never follows it.
func TestExecMountRefusesLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &box{dir: filepath.Join(dir, "box")}
	if err := os.Mkdir(b.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, execGuard(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := execMount(b); err == nil {
		t.Fatal("execMount took a link at the exec directory")
	}
	fi, err := os.Stat(target)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the link's target changed: %v %v", fi.Mode(), err)
	}
	if _, err := os.Lstat(filepath.Join(target, "box")); err == nil {
		t.Fatal("a directory was made through the link")
	}
}

// TestTrustMountRefusesLink: a link planted where a container box's trust
// directory goes is neither followed nor written through: no directory
// made, no mode changed, no copy written at its target.
func TestTrustMountRefusesLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	b := &box{dir: filepath.Join(dir, "box")}
	if err := os.Mkdir(b.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, trustDir(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := (&containerEngine{}).trustMount(b); err == nil {
		t.Fatal("trustMount took a link at the trust directory")
	}
	fi, err := os.Stat(target)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the link's target changed: %v %v", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatalf("written through the link: %v", ents)
	}
}

// TestTrustCopyReplacesLink: a link planted at a trust file's copy is
// replaced by a regular file when the setting is passed on, and removed
// (not followed) when it is not; its target is never written or removed.
func TestTrustCopyReplacesLink(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(src, []byte("server CA"), 0o644); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &box{dir: filepath.Join(dir, "box")}
	if err := os.MkdirAll(trustDir(b), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"} {
		if err := os.Symlink(victim, filepath.Join(trustDir(b), trustName(v))); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SSL_CERT_FILE", src)
	t.Setenv("NODE_EXTRA_CA_CERTS", "")
	(&containerEngine{s: &Server{}}).copyTrust(b)
	if fi, err := os.Lstat(filepath.Join(trustDir(b), trustName("SSL_CERT_FILE"))); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the passed-on copy: %v %v; want a regular file", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(trustDir(b), trustName("NODE_EXTRA_CA_CERTS"))); !os.IsNotExist(err) {
		t.Errorf("the copy of an unset setting: %v; want it gone", err)
	}
	if got, err := os.ReadFile(victim); err != nil || string(got) != "keep" {
		t.Fatalf("the links' target: %q %v; want it untouched", got, err)
	}
}
