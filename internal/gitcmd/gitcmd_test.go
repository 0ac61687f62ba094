package gitcmd

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestErrorLine(t *testing.T) {
	stderr := "hint: one\nerror: 'sub/' does not have a commit checked out\nfatal: adding files failed\n"
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{Args: []string{"add", "-A"}, Stderr: stderr}, "git add -A: error: 'sub/' does not have a commit checked out"},
		{Error{Args: []string{"add", "-A"}, Stderr: stderr, FirstLine: true}, "git add -A: hint: one"},
		{Error{Args: []string{"x"}, Stderr: "a\n\nlast\n\n"}, "git x: last"},
		{Error{Args: []string{"fetch"}, Stderr: "ssh: lost\nfatal: early EOF\n", Cause: "ssh: lost"}, "git fetch: ssh: lost"},
		{Error{Args: []string{"x"}, Stderr: " \n", Err: errors.New("exit status 1")}, "git x: exit status 1"},
		{Error{Args: []string{"x"}, Stderr: "", Err: errors.New("exit status 1"), FirstLine: true}, "git x: exit status 1"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestRun(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	r := Runner{Dir: t.TempDir(), FirstLine: true}
	out, err := r.Output(context.Background(), nil, "version")
	if err != nil || !strings.HasPrefix(out, "git version ") {
		t.Fatalf("git version = %q, %v", out, err)
	}
	_, err = r.Output(context.Background(), nil, "rev-parse", "--verify", "no-such-rev")
	var ge *Error
	if !errors.As(err, &ge) || !ge.FirstLine || ge.Stderr == "" {
		t.Fatalf("err = %#v, want an *Error with stderr", err)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Errorf("err does not unwrap to *exec.ExitError: %v", err)
	}
}
