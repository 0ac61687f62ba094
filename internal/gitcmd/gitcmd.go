// Package gitcmd runs the system git for both halves of offload, the
// laptop's (offload/) and the box's (boxagent/): one runner, with the
// options of internal/plumbing, and one error that keeps git's stderr.
package gitcmd

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/plumbing"
)

// Error is a git command that failed, with what it printed on stderr.
// Match it with errors.As; Unwrap gives Err.
type Error struct {
	// Args are git's arguments after "git", without plumbing's options.
	Args []string
	// Stderr is all git wrote on stderr.
	Stderr string
	// Err is why the command failed: an *exec.ExitError, or the error of
	// starting it.
	Err error
	// FirstLine makes Error name Stderr's first line, not its cause line.
	FirstLine bool
	// Cause, when set, is the line Error names over Stderr's: one the
	// caller found in Stderr that says better why git failed (the remote
	// shell's own line on a lost connection, where git says "fatal:
	// early EOF").
	Cause string
}

// Error is "git ARGS: " and one line of Stderr (Err's text when Stderr is
// blank). The line is Cause when set; else the first when FirstLine is
// set; else the first error: or fatal: line, which names the cause (git
// add's "error: 'sub/' does not have a commit checked out" before its
// "fatal: adding files failed"; a lock clash's "fatal: Unable to create
// '….lock': File exists." before its advice), else the last line.
func (e *Error) Error() string {
	msg := e.Cause
	switch {
	case msg != "":
	case e.FirstLine:
		msg, _, _ = strings.Cut(strings.TrimSpace(e.Stderr), "\n")
	default:
		for _, l := range strings.Split(e.Stderr, "\n") {
			if l = strings.TrimSpace(l); l == "" {
				continue
			}
			msg = l
			if strings.HasPrefix(l, "error: ") || strings.HasPrefix(l, "fatal: ") {
				break
			}
		}
	}
	if msg == "" {
		msg = e.Err.Error()
	}
	return "git " + strings.Join(e.Args, " ") + ": " + msg
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Runner runs git in one directory with one environment. The zero value
// runs git in the current directory with the process's environment.
type Runner struct {
	// Dir is the directory git runs in; empty is the current one.
	Dir string
	// Env is git's whole environment; nil is the process's.
	Env []string
	// Prep, if not nil, adjusts each command before it starts.
	Prep func(*exec.Cmd)
	// FirstLine sets Error.FirstLine in the errors Run returns.
	FirstLine bool
}

// Cmd makes the git command for args, with plumbing's options in front
// (plumbing.Args); its stdin, stdout and stderr are the caller's to set.
func (r Runner) Cmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, "git", plumbing.Args(args...)...)
	c.Dir = r.Dir
	c.Env = r.Env
	if r.Prep != nil {
		r.Prep(c)
	}
	return c
}

// Run runs git with stdin (nil: none) and its stdout going to stdout (a
// file: git writes it itself). A failure is an *Error holding the stderr.
func (r Runner) Run(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	var errb bytes.Buffer
	c := r.Cmd(ctx, args...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, &errb
	if err := c.Run(); err != nil {
		return &Error{Args: args, Stderr: errb.String(), Err: err, FirstLine: r.FirstLine}
	}
	return nil
}

// Output runs git as Run does and returns its stdout, also what it wrote
// before it failed.
func (r Runner) Output(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	var out bytes.Buffer
	err := r.Run(ctx, stdin, &out, args...)
	return out.String(), err
}
