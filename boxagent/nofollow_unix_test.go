//go:build unix

package boxagent

import (
	"os"
	"path/filepath"
	"testing"
)

// A hook event that finds the inbox down is spooled to the repo's
// events.pending, never through a link planted there: the file the link
// names is left as it was, and the event is refused.
func TestSpoolEventNoFollow(t *testing.T) {
	dir := t.TempDir()
	c := &Config{Home: filepath.Join(dir, "home"), Workspace: filepath.Join(dir, "ws"), RunDir: filepath.Join(dir, "run")}
	const k = "0123456789abcdef"
	if err := os.MkdirAll(c.repoDir(k), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(c.repoDir(k), pendingEvents)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Event(k, "claude", "Stop", nil); err == nil {
		t.Error("an event spooled through a link in events.pending's place")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("the linked file holds %q, want it untouched", b)
	}
}

// clearGitLocks removes the locks and temporary packs in a copy's git
// directory, and nothing a link there leads to: a link in a lock's place
// goes, not its target, and a linked refs/ or objects/pack/ is not entered.
func TestClearGitLocksNoFollow(t *testing.T) {
	dir := t.TempDir()
	gd := filepath.Join(dir, "copy", ".git")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{gd, filepath.Join(gd, "objects"), outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		t.Helper()
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(gd, "index.lock"))
	for _, f := range []string{"HEAD.lock", "x.lock", "tmp_1"} {
		write(filepath.Join(outside, f))
	}
	for link, to := range map[string]string{"HEAD.lock": filepath.Join(outside, "HEAD.lock"), "refs": outside, "objects/pack": outside} {
		if err := os.Symlink(to, filepath.Join(gd, link)); err != nil {
			t.Fatal(err)
		}
	}
	clearGitLocks(gd)
	for _, gone := range []string{"index.lock", "HEAD.lock"} {
		if _, err := os.Lstat(filepath.Join(gd, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	for _, f := range []string{"HEAD.lock", "x.lock", "tmp_1"} {
		if _, err := os.Stat(filepath.Join(outside, f)); err != nil {
			t.Errorf("a link in the copy led clearGitLocks to remove %s outside it: %v", f, err)
		}
	}
}
