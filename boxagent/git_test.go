package boxagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// S' has an edit that git's stat data alone cannot tell from the last
// commit: same size and mtime, written in the second of the last index
// write (racy git). The snapshot must see it as the real index would.
func TestSnapshotRacyEdit(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{Environ: append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)}
	git := func(args ...string) string {
		t.Helper()
		out, err := cfg.git(dir, nil, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	git("init", "-q")
	git("config", "user.name", "T")
	git("config", "user.email", "t@example.com")
	// ctime cannot be set; without this the test would depend on whether
	// the two writes fall in one second.
	git("config", "core.trustctime", "false")

	a := filepath.Join(dir, "a.txt")
	// A second in the past, with nanoseconds, stands for "this second".
	then := time.Date(2020, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(a, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(a, then, then); err != nil {
			t.Fatal(err)
		}
	}
	write("A\n")
	git("add", "-A")
	git("commit", "-q", "-m", "A")
	// The index was written in the same second as a.txt.
	if err := os.Chtimes(filepath.Join(dir, ".git", "index"), then, then); err != nil {
		t.Fatal(err)
	}
	write("B\n")

	if _, err := cfg.snapshotCommit(dir, "refs/cocoonbox/back/o1", "cocoonbox back o1"); err != nil {
		t.Fatal(err)
	}
	if got := git("show", "refs/cocoonbox/back/o1:a.txt"); got != "B" {
		t.Errorf("S' has a.txt %q, want B (the edit after the commit)", got)
	}
	if got := git("show", "HEAD:a.txt"); got != "A" {
		t.Errorf("HEAD has a.txt %q", got)
	}
	// The real index is untouched.
	if out, err := exec.Command("git", "-C", dir, "diff", "--cached", "--quiet").CombinedOutput(); err != nil {
		t.Errorf("the real index changed: %v %s", err, out)
	}
}

// TestIsRepo: begin takes a copy as the box's mirror only when it is a git
// repository of its own; .git without objects (what rsync brings before
// the bundle) or a directory inside another repository is not.
func TestIsRepo(t *testing.T) {
	root := t.TempDir()
	cfg := &Config{Environ: append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+root)}
	repo := filepath.Join(root, "repo")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	inside := filepath.Join(repo, "sub")
	synced := filepath.Join(root, "synced")
	for _, d := range []string{inside, filepath.Join(synced, ".git", "refs", "heads")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(synced, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{repo: true, inside: false, synced: false, filepath.Join(root, "none"): false} {
		if got := cfg.isRepo(dir); got != want {
			t.Errorf("isRepo(%s) = %v, want %v", dir, got, want)
		}
	}
}

// The first prompt's Mac-only notes read the copy's own config: the
// options our plumbing runs with (internal/plumbing) must not answer for
// it, and the hook that hooksPath names must not run.
func TestAttachmentsReadUserConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{Environ: append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)}
	hooks := filepath.Join(dir, "hooks")
	mark := filepath.Join(dir, "mark")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hooks, "post-index-change"), []byte("#!/bin/sh\ntouch '"+mark+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"config", "core.hooksPath", hooks}, {"config", "credential.helper", "osxkeychain"}} {
		if _, err := cfg.git(dir, nil, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	// A tracked file whose stat data changed since the index: status
	// refreshes it and writes the index, which runs post-index-change.
	a := filepath.Join(dir, "a.txt")
	os.WriteFile(a, []byte("a\n"), 0o644)
	if _, err := cfg.git(dir, nil, nil, "add", "a.txt"); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Second)
	os.Chtimes(a, later, later)
	var p promptInput
	cfg.attachments(dir, &p)
	want := []string{"credential.helper osxkeychain", "core.hooksPath " + hooks}
	if strings.Join(p.MacOnly, "\n") != strings.Join(want, "\n") {
		t.Errorf("MacOnly = %q, want %q", p.MacOnly, want)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("the status of the attachments ran the copy's post-index-change hook")
	}
}
