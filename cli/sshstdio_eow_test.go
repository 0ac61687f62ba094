//go:build unix

package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSSHStdioEOW: `ssh HOST yes | head -1` ends as it does with sshd.
// When head exits, OpenSSH's client sends eow@openssh.com; sshd closes the
// command's stdout, yes dies of SIGPIPE on its next write, and ssh exits
// 255 (the exit-signal). Through cocoonbox-ssh --stdio the same must
// happen, where yes used to stream forever: a deadline fails it, not a
// timing. A shell that goes on after yes shows the SIGPIPE (status 141)
// and that the session was not simply cut (ssh then exits 0).
func TestSSHStdioEOW(t *testing.T) {
	t.Parallel()
	d := startSSHD(t)
	b := startBox(t)
	via := newStdioSSH(t, b)
	// Both servers' commands write here: sshd's as this user, the box's as
	// the box user.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	const script = `ssh "$@" | head -1; echo "ssh: ${PIPESTATUS[0]}" >&2`
	runPipe := func(env []string, args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, "bash", append([]string{"-c", script, "bash"}, args...)...)
		c.Env = env
		c.WaitDelay = time.Second
		var stdout, stderr strings.Builder
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		if ctx.Err() != nil {
			t.Fatalf("ssh %q | head -1 did not end in 30 s; stderr so far %q", args, stderr.String())
		}
		if err != nil {
			t.Fatalf("ssh %q | head -1: %v", args, err)
		}
		return result{Stdout: stdout.String(), Stderr: stderr.String()}
	}
	status := filepath.Join(dir, "status")
	for _, command := range []string{"yes", `yes; echo "yes: $?" >` + status} {
		want := runPipe(cleanEnv(t), "-F", d.Config, "-p", d.Port, d.User+"@127.0.0.1", command)
		wantStatus, _ := os.ReadFile(status)
		os.Remove(status)
		got := runPipe(append(cleanEnv(t), b.Env...), "-F", via.Config, "main.cocoonbox", command)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ssh HOST %q | head -1: sshd and cocoonbox-ssh --stdio differ (-sshd +stdio):\n%s", command, diff)
		}
		if gotStatus, _ := os.ReadFile(status); string(gotStatus) != string(wantStatus) {
			t.Errorf("ssh HOST %q | head -1: yes ended with %q under sshd and %q in the box", command, wantStatus, gotStatus)
		}
	}
	if string(readFile(t, status)) != "yes: 141\n" {
		t.Errorf("after head exits, yes ended with %q; want killed by SIGPIPE (141)", readFile(t, status))
	}
}
