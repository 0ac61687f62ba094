package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSSHConfigOpenSSH writes the block with cocoonbox ssh-config and
// reaches the box with the real OpenSSH client through it: the
// ProxyCommand's path has a space and a %, the host key is pinned with
// StrictHostKeyChecking on, so a wrong pin is refused.
func TestSSHConfigOpenSSH(t *testing.T) {
	tb := startBox(t)
	home := ""
	for _, kv := range tb.Env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	real, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "my tools", "100%")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "cocoonbox-ssh")); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) (string, string, error) {
		cmd := exec.Command(name, args...)
		cmd.Env = tb.Env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	if _, errs, err := run("cocoonbox", "ssh-config", "--ssh-path", filepath.Join(dir, "cocoonbox-ssh")); err != nil {
		t.Fatalf("ssh-config: %v\n%s", err, errs)
	}
	cfg := filepath.Join(home, ".ssh", "config")
	// OpenSSH reads the passwd entry's ~/.ssh/config, not $HOME's: -F.
	out, errs, err := run("ssh", "-F", cfg, "main.cocoonbox", "echo", "ok", "from", `"$COCOONBOX_BOX"`)
	if err != nil || out != "ok from main\n" || errs != "" {
		t.Errorf("ssh main.cocoonbox: %q, stderr %q, %v", out, errs, err)
	}

	// Another key in our known_hosts: OpenSSH refuses the box.
	kh := filepath.Join(home, ".local", "state", "cocoonbox", "ssh_known_hosts")
	good := readFile(t, kh)
	other := filepath.Join(t.TempDir(), "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	write(t, kh, "cocoonbox "+readFile(t, other+".pub"))
	out, errs, err = run("ssh", "-F", cfg, "main.cocoonbox", "echo", "ok")
	if err == nil || out != "" || !strings.Contains(errs, "Host key verification failed") {
		t.Errorf("ssh with a wrong pin: %q, stderr %q, %v; want it refused", out, errs, err)
	}
	// ssh-config again pins the right key.
	if _, errs, err := run("cocoonbox", "ssh-config", "--ssh-path", filepath.Join(dir, "cocoonbox-ssh")); err != nil {
		t.Fatalf("ssh-config: %v\n%s", err, errs)
	}
	if got := readFile(t, kh); got != good {
		t.Errorf("known_hosts after ssh-config: %q, want %q", got, good)
	}
	if out, errs, err := run("ssh", "-F", cfg, "main.cocoonbox", "true"); err != nil {
		t.Errorf("ssh after ssh-config: %v\n%s%s", err, out, errs)
	}
}
