package cli_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// useBlock is the README's Use section's first indented block, one
// command a line, without the comments.
func useBlock(t *testing.T) []string {
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "## Use":
			in = true
		case in && strings.HasPrefix(l, "## "):
			return lines
		case in && strings.HasPrefix(l, "    "):
			cmd, _, _ := strings.Cut(strings.TrimSpace(l), " # ")
			lines = append(lines, strings.TrimSpace(cmd))
		case in && len(lines) > 0:
			return lines
		}
	}
	return lines
}

// The README's Use section runs as written, top to bottom, on a fresh
// local box: a new HOME with no git configuration and no credentials, the
// built binaries on PATH, and a src directory to copy. It checks what
// each step promises: box main answers, the copy arrives, the clone is of
// a repository on branch main.
func TestReadmeUse(t *testing.T) {
	lines := useBlock(t)
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "cocoonbox localbox start") {
		t.Fatalf("README's Use block: %q", lines)
	}
	work := t.TempDir()
	home := filepath.Join(work, "home")
	os.MkdirAll(home, 0o700)
	reachable(t, filepath.Dir(work), work, home)
	os.MkdirAll(filepath.Join(work, "src"), 0o755)
	os.WriteFile(filepath.Join(work, "src", "hello.txt"), []byte("hello\n"), 0o644)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COCOONBOX_CLAIMS_DIR=" + filepath.Join(home, ".claims"), "GIT_CONFIG_NOSYSTEM=1", "LANG=C"}
	sh := func(line string) string {
		t.Helper()
		c := exec.Command("sh", "-ec", line)
		c.Dir, c.Env = work, env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		c := exec.Command("cocoonbox", "localbox", "stop")
		c.Env = env
		c.Run()
	})
	for _, l := range lines {
		t.Logf("$ %s", l)
		t.Log(sh(l))
	}
	state := filepath.Join(home, ".local", "state", "cocoonbox", "localbox", "boxes", "main")
	if b, err := os.ReadFile(filepath.Join(state, "workspace", "src", "hello.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("the tar pipe: %q, %v", b, err)
	}
	if head, err := os.ReadFile(filepath.Join(state, "workspace", "app.git", "HEAD")); err != nil || string(head) != "ref: refs/heads/main\n" {
		t.Errorf("the box's repository: HEAD %q, %v; want main", head, err)
	}
	if _, err := os.Stat(filepath.Join(work, "app", ".git")); err != nil {
		t.Errorf("the clone: %v", err)
	}
}
