package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

var lockClashRE = regexp.MustCompile(`Unable to create '([^'\n]+\.lock)': File exists`)

// heldLock returns the lock file that made git fail, or "".
func heldLock(err error) string {
	var ge *gitcmd.Error
	if errors.As(err, &ge) {
		if m := lockClashRE.FindStringSubmatch(ge.Stderr); m != nil {
			return m[1]
		}
	}
	return ""
}

// git runs the system git in one work tree with a given environment.
type git struct {
	dir string
	env []string
	// prep, when set, adjusts each command before it starts.
	prep func(*exec.Cmd)
}

// HostEnv filters a laptop environment for a child process: git's own
// repository variables (set when we run inside a hook) would point git
// elsewhere, and COCOONBOX_TOKEN stays only with keepToken, for children
// that reach the box (DESIGN.md "Security invariants" 1).
func HostEnv(environ []string, keepToken bool) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
			"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX", "GIT_NAMESPACE":
			continue
		case "COCOONBOX_TOKEN":
			if !keepToken {
				continue
			}
		}
		out = append(out, kv)
	}
	return out
}

// with returns g with extra environment entries.
func (g git) with(kv ...string) git {
	env := append([]string(nil), g.env...)
	return git{dir: g.dir, env: append(env, kv...), prep: g.prep}
}

// runner is g as the one git runner of both halves (internal/gitcmd),
// whose errors are *gitcmd.Error naming git's cause line.
func (g git) runner() gitcmd.Runner {
	return gitcmd.Runner{Dir: g.dir, Env: g.env, Prep: g.prep}
}

// run runs git and returns its stdout.
func (g git) run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	return g.runner().Output(ctx, stdin, args...)
}

// runTo runs git with its stdout going to w (a file: git writes it
// itself).
func (g git) runTo(ctx context.Context, stdin io.Reader, w io.Writer, args ...string) error {
	return g.runner().Run(ctx, stdin, w, args...)
}

// line runs git and returns its stdout without the final newline.
func (g git) line(ctx context.Context, args ...string) (string, error) {
	out, err := g.run(ctx, nil, args...)
	return strings.TrimRight(out, "\n"), err
}

// ok runs git and reports whether it exited 0; any other failure to run
// is an error.
func (g git) ok(ctx context.Context, args ...string) (bool, error) {
	_, err := g.run(ctx, nil, args...)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return false, nil
	}
	return err == nil, err
}

// revs resolves revision expressions with one git (cat-file
// --batch-check) instead of a rev-parse each: each one's object name, or
// "" for one that names no object (git rev-parse -q --verify would fail).
// An expression must be one line.
func (g git) revs(ctx context.Context, exprs ...string) ([]string, error) {
	var in strings.Builder
	for _, e := range exprs {
		if e == "" || strings.ContainsAny(e, "\n\r") {
			return nil, fmt.Errorf("bad revision %q", e)
		}
		in.WriteString(e + "\n")
	}
	out, err := g.run(ctx, strings.NewReader(in.String()), "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(exprs) {
		return nil, fmt.Errorf("git cat-file --batch-check: %d lines for %d revisions", len(lines), len(exprs))
	}
	for i, l := range lines {
		// Found: the object name alone; else "<expr> missing" or
		// "<expr> ambiguous".
		if !isOID(l) {
			lines[i] = ""
		}
	}
	return lines, nil
}

// nulList splits git's -z output.
func nulList(s string) []string {
	s = strings.TrimSuffix(s, "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// exitCode is a failed command's exit status, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
