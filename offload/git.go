package offload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/plumbing"
)

// GitError is a git command that failed, with what it printed on stderr.
type GitError struct {
	Args   []string
	Stderr string
	Err    error
}

// Error is the command and one line of its stderr: the first error: or
// fatal: line, which names the cause (git add's "error: 'sub/' does not
// have a commit checked out" before its "fatal: adding files failed"; a
// lock clash's "fatal: Unable to create '….lock': File exists." before
// its advice), else the last line.
func (e *GitError) Error() string {
	msg := ""
	for _, l := range strings.Split(e.Stderr, "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if strings.HasPrefix(l, "error: ") || strings.HasPrefix(l, "fatal: ") {
			msg = l
			break
		}
		msg = l
	}
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

var lockClashRE = regexp.MustCompile(`Unable to create '([^'\n]+\.lock)': File exists`)

// heldLock returns the lock file that made git fail, or "".
func heldLock(err error) string {
	var ge *GitError
	if errors.As(err, &ge) {
		if m := lockClashRE.FindStringSubmatch(ge.Stderr); m != nil {
			return m[1]
		}
	}
	return ""
}

func (e *GitError) Unwrap() error { return e.Err }

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

// cmd makes the git command, with the options of our own plumbing
// (internal/plumbing); stdout and stdin are the caller's.
func (g git) cmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, "git", plumbing.Args(args...)...)
	c.Dir = g.dir
	c.Env = g.env
	if g.prep != nil {
		g.prep(c)
	}
	return c
}

// run runs git and returns its stdout.
func (g git) run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	var out bytes.Buffer
	err := g.runTo(ctx, stdin, &out, args...)
	return out.String(), err
}

// runTo runs git with its stdout going to w (a file: git writes it
// itself).
func (g git) runTo(ctx context.Context, stdin io.Reader, w io.Writer, args ...string) error {
	var errb bytes.Buffer
	c := g.cmd(ctx, args...)
	c.Stdin, c.Stdout, c.Stderr = stdin, w, &errb
	if err := c.Run(); err != nil {
		return &GitError{Args: args, Stderr: errb.String(), Err: err}
	}
	return nil
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
