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
