package offload

import (
	"fmt"
	"github.com/cocoonbox/cocoonbox/handover"
	"reflect"

	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testEnv is an environment for git with its own HOME and no system or
// user configuration but an identity.
func testEnv(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	cfg := "[user]\n\tname = Test\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "LANG=C"}
}

// run runs a command in dir with env and returns its trimmed stdout.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	c.Env = env
	out, err := c.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, msg)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a repository with one commit of files and opens it.
func newRepo(t *testing.T, env []string, files map[string]string) *Repo {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, env, "git", "init", "-q")
	writeFiles(t, dir, files)
	run(t, dir, env, "git", "add", "-A")
	run(t, dir, env, "git", "commit", "-q", "--allow-empty", "-m", "init")
	r, err := OpenRepo(context.Background(), dir, env)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// validHandover is a hand-over that passes ValidateHandover, with extra
// lines under Commands and Environment facts.
func validHandover(commands, envFacts string) []byte {
	var b strings.Builder
	b.WriteString("# Hand-over: add a greeting\n")
	for _, h := range handover.Headings {
		b.WriteString("\n" + h + "\n\n")
		switch h {
		case "## Commands":
			b.WriteString(commands + "\n")
		case "## Environment facts":
			b.WriteString(envFacts + "\n")
		default:
			b.WriteString("none\n")
		}
	}
	return []byte(b.String())
}

// nextText is steps as text, one a line, each command shown as
// <verb N>: how it is typed is cli's.
func nextText(steps ...Step) string {
	var l []string
	for _, s := range steps {
		l = append(l, s.Text(func(c Command) string { return fmt.Sprintf("<verb %d %+v>", c.Verb, c) }))
	}
	return strings.Join(l, "\n")
}

// hasCommand reports whether step names c.
func hasCommand(step Step, c Command) bool {
	for _, p := range step {
		if pc, ok := p.(Command); ok && reflect.DeepEqual(pc, c) {
			return true
		}
	}
	return false
}
