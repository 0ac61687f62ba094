package cli_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

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
	// Shim is the cocoonbox-ssh the ProxyCommand runs.
	Shim string
	// Key is the server's host key, as pinned.
	Key ssh.PublicKey
}

// newStdioSSH pins the host key cocoonbox-ssh --stdio will use with box b
// (created here, in the state directory under b's HOME) and writes the
// ssh_config.
func newStdioSSH(t *testing.T, b *testBox) *stdioSSH {
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
		fmt.Sprintf("  ProxyCommand %q --stdio %%h", shim),
		"  UserKnownHostsFile " + known,
		"  GlobalKnownHostsFile /dev/null",
		"  StrictHostKeyChecking yes",
		"  UpdateHostKeys no",
		"  BatchMode yes",
		"  IdentityAgent none",
		"  ControlMaster no",
	}
	lines = append(lines, "  Ciphers "+sshserve.ClientCiphers)
	write(t, cfg, strings.Join(lines, "\n")+"\n")
	return &stdioSSH{Config: cfg, Env: append(cleanEnv(t), b.Env...), Dir: dir, Shim: shim, Key: key.PublicKey()}
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
