package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cocoonbox/cocoonbox/sshserve"
)

// stdioSSH is OpenSSH's own ssh set up as a user's ~/.ssh/config would be
// for cocoonbox-ssh --stdio: a Host *.cocoonbox block with the ProxyCommand
// and the server's host key pinned, StrictHostKeyChecking on.
type stdioSSH struct {
	// Config is the ssh_config to pass with -F.
	Config string
	// Env is the box's environment, which ssh hands to the ProxyCommand.
	Env []string
	// Dir holds Config and the known_hosts file; tests may put more there.
	Dir string
}

// newStdioSSH pins the host key cocoonbox-ssh --stdio will use with box b
// (created here, in the state directory under b's HOME) and writes the
// ssh_config; extra lines go into the Host block.
func newStdioSSH(t *testing.T, b *testBox, extra ...string) *stdioSSH {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatalf("%v: install openssh-client (scripts/deps.sh)", err)
	}
	shim, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	key, err := sshserve.HostKey(filepath.Join(envValue(b.Env, "HOME"), ".local", "state", "cocoonbox"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	known := filepath.Join(dir, "known_hosts")
	write(t, known, sshserve.KnownHostsLine("*.cocoonbox", key.PublicKey())+"\n")
	cfg := filepath.Join(dir, "ssh_config")
	lines := []string{
		"Host *.cocoonbox",
		fmt.Sprintf("  ProxyCommand %q --stdio %%n", shim),
		"  UserKnownHostsFile " + known,
		"  GlobalKnownHostsFile /dev/null",
		"  StrictHostKeyChecking yes",
		"  UpdateHostKeys no",
		"  BatchMode yes",
		"  IdentityAgent none",
		"  ControlMaster no",
	}
	for _, l := range extra {
		lines = append(lines, "  "+l)
	}
	write(t, cfg, strings.Join(lines, "\n")+"\n")
	return &stdioSSH{Config: cfg, Env: append(cleanEnv(t), b.Env...), Dir: dir}
}

// cmd is ssh -F Config ARGS in Env.
func (s *stdioSSH) cmd(args ...string) *exec.Cmd {
	c := exec.Command("ssh", append([]string{"-F", s.Config}, args...)...)
	c.Env = s.Env
	return c
}

// envValue is NAME's value in env, the last one given.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if x, ok := strings.CutPrefix(kv, name+"="); ok {
			v = x
		}
	}
	return v
}

// frameRE picks out of ssh -vvv's log the frames that end a session
// channel: its exit status or signal, its EOF and its close.
var frameRE = regexp.MustCompile(`(?m)^debug[0-9]: (?:client_input_channel_req: channel 0 rtype (exit-status|exit-signal)|channel 0: rcvd (eof|close))`)

// TestSSHStdioExitCodes: through OpenSSH's ssh and cocoonbox-ssh --stdio,
// the remote exit code reaches ssh's exit status, a command killed by a
// signal ends in 255, and the frames come in the order every client can
// read: exit-status (or exit-signal), then EOF, then close
// (tailscale's tailssh_frameorder_test.go checks the same).
func TestSSHStdioExitCodes(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	tests := []struct {
		command string
		code    int
		frames  []string
		stderr  string
	}{
		{command: "true", code: 0, frames: []string{"exit-status", "eof", "close"}},
		{command: "exit 1", code: 1, frames: []string{"exit-status", "eof", "close"}},
		{command: "echo out; exit 42", code: 42, frames: []string{"exit-status", "eof", "close"}},
		{command: "no-such-command-here", code: 127, frames: []string{"exit-status", "eof", "close"}},
		{command: "exit 255", code: 255, frames: []string{"exit-status", "eof", "close"}},
		{command: "kill -TERM $$", code: 255, frames: []string{"exit-signal", "eof", "close"}},
		{command: "seq 1 100000 >&2; kill -KILL $$", code: 255, frames: []string{"exit-signal", "eof", "close"}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			c := s.cmd("-vvv", "main.cocoonbox", tt.command)
			var stderr strings.Builder
			c.Stderr = &stderr
			err := c.Run()
			if _, ok := err.(*exec.ExitError); err != nil && !ok {
				t.Fatal(err)
			}
			if got := c.ProcessState.ExitCode(); got != tt.code {
				t.Errorf("exit status %d, want %d; ssh -vvv says:\n%s", got, tt.code, stderr.String())
			}
			var frames []string
			for _, m := range frameRE.FindAllStringSubmatch(stderr.String(), -1) {
				frames = append(frames, m[1]+m[2])
			}
			if diff := cmp.Diff(tt.frames, frames); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSSHStdioErrors: what goes wrong on our side is one line on the
// session's stderr and ssh's exit status 255.
func TestSSHStdioErrors(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)

	c := s.cmd("nobox.cocoonbox", "true")
	out, err := c.CombinedOutput()
	if c.ProcessState.ExitCode() != 255 || !strings.Contains(string(out), `cocoonbox-ssh: `) || !strings.Contains(string(out), `"nobox"`) {
		t.Errorf("a box that does not exist: %v, output %q; want 255 and one line naming it", err, out)
	}

	c = s.cmd("-s", "main.cocoonbox", "no-such-subsystem")
	out, _ = c.CombinedOutput()
	if c.ProcessState.ExitCode() != 255 || !strings.Contains(string(out), "subsystem request failed") {
		t.Errorf("an unknown subsystem: exit %d, output %q; want 255 and ssh's refusal", c.ProcessState.ExitCode(), out)
	}

	// A bad command line of --stdio itself: one line, the usage, 255.
	shim, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--stdio"}, {"--stdio", "a", "b"}, {"--stdio", ".cocoonbox"}, {"--stdio", "--suffix", "box", "main.box"}, {"--stdio", "--bogus", "main"}} {
		c := exec.Command(shim, args...)
		c.Env = s.Env
		var stdout, stderr strings.Builder
		c.Stdout, c.Stderr = &stdout, &stderr
		c.Run()
		first, _, _ := strings.Cut(stderr.String(), "\n")
		if c.ProcessState.ExitCode() != 255 || stdout.Len() != 0 || !strings.HasPrefix(first, "cocoonbox-ssh: ") || !strings.Contains(stderr.String(), "usage: cocoonbox-ssh --stdio") {
			t.Errorf("cocoonbox-ssh %q: exit %d, stdout %q, stderr %q; want 255, one line and the usage on stderr", args, c.ProcessState.ExitCode(), stdout.String(), stderr.String())
		}
	}
}

// TestSSHStdioHostKey: the host key is made once, 0600, and pinned:
// ssh with StrictHostKeyChecking refuses a server whose key is not the
// pinned one, and accepts ours without a word.
func TestSSHStdioHostKey(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	c := s.cmd("main.cocoonbox", "echo ok")
	out, err := c.CombinedOutput()
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("pinned key: %v, output %q; want ok and nothing else", err, out)
	}
	state := filepath.Join(envValue(b.Env, "HOME"), ".local", "state", "cocoonbox")
	fi, err := os.Stat(filepath.Join(state, sshserve.HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("host key mode %04o, want 0600", fi.Mode().Perm())
	}
	// Another key pinned: ssh must refuse.
	other, err := sshserve.HostKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(s.Dir, "known_hosts"), sshserve.KnownHostsLine("*.cocoonbox", other.PublicKey())+"\n")
	c = s.cmd("main.cocoonbox", "echo ok")
	out, _ = c.CombinedOutput()
	if c.ProcessState.ExitCode() != 255 || !strings.Contains(string(out), "REMOTE HOST IDENTIFICATION HAS CHANGED") {
		t.Errorf("wrong key pinned: exit %d, output %q; want ssh's refusal", c.ProcessState.ExitCode(), out)
	}
}
