//go:build unix

package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSSHConfigKeepsOwner: root writing another user's ssh_config
// (ssh-config --file /home/u/.ssh/config under sudo) leaves it that
// user's, with its group and mode: ssh refuses a config another user
// owns. The atomic replace would otherwise make it root's.
func TestSSHConfigKeepsOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving a file to another user needs root (make test runs as root)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	write(t, cfg, "Host x\n  User y\n")
	const uid, gid = 4242, 4343
	if err := os.Chown(cfg, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg, 0o640); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("cocoonbox", "ssh-config", "--ssh-path", "/opt/cb/cocoonbox-ssh", "--file", cfg)
	c.Env = append(cleanEnv(t), "HOME="+dir, "PATH="+os.Getenv("PATH"))
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("ssh-config: %v\n%s", err, out)
	}
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != uid || st.Gid != gid || fi.Mode().Perm() != 0o640 {
		t.Errorf("after ssh-config: owner %d:%d mode %04o, want %d:%d 0640", st.Uid, st.Gid, fi.Mode().Perm(), uid, gid)
	}
	if !strings.Contains(readFile(t, cfg), "BEGIN cocoonbox") {
		t.Errorf("no block written:\n%s", readFile(t, cfg))
	}
}
