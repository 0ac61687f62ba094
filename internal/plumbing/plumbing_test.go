package plumbing

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestArgsRunNoHook runs a real git with Args in a repository whose
// fsmonitor and post-index-change hook write a marker, and without Args,
// where they must.
func TestArgsRunNoHook(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "mark")
	run := func(args ...string) {
		t.Helper()
		c := exec.Command("git", args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("init", "-q")
	script := "#!/bin/sh\necho \"$0\" >> '" + mark + "'\nexit 1\n"
	for _, p := range []string{".git/fsmon", ".git/hooks/post-index-change"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run("config", "core.fsmonitor", ".git/fsmon")
	os.WriteFile(filepath.Join(dir, "a"), []byte("a\n"), 0o644)

	run(Args("add", "-A")...)
	run(Args("status", "--short")...)
	if b, err := os.ReadFile(mark); err == nil {
		t.Fatalf("with Args, git ran the repository's hooks:\n%s", b)
	}
	run("add", "-A")
	b, err := os.ReadFile(mark)
	if err != nil || !strings.Contains(string(b), "fsmon") || !strings.Contains(string(b), "post-index-change") {
		t.Fatalf("without Args the marker should name both hooks; got %q (%v)", b, err)
	}
}

func TestArgsLeavesConfigReads(t *testing.T) {
	if got := Args("config", "--get", "core.hooksPath"); !slices.Equal(got, []string{"config", "--get", "core.hooksPath"}) {
		t.Errorf("Args(config ...) = %q; the overrides would answer the read", got)
	}
	if got := Args("write-tree"); got[len(got)-1] != "write-tree" || !slices.Contains(got, "core.fsmonitor=false") {
		t.Errorf("Args(write-tree) = %q", got)
	}
}
