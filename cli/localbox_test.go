package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLocalboxStopEndsTmux: `localbox stop` ends the boxes' tmux servers
// and what runs in them, not only the server process. The HOME is short:
// tmux's socket path must fit in 107 bytes.
func TestLocalboxStopEndsTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing: run scripts/deps.sh")
	}
	home, err := os.MkdirTemp("", "lb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	run := func(name string, args ...string) string {
		t.Helper()
		c := exec.Command(name, args...)
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("cocoonbox", "localbox", "start")
	t.Cleanup(func() { exec.Command("cocoonbox", "localbox", "stop").Run() })
	marker := "sleep 4243" + filepath.Base(home)[2:]
	run("cocoonbox-ssh", "main", "tmux new-session -d -s keep '"+marker+"'")
	if exec.Command("pgrep", "-f", marker).Run() != nil {
		t.Fatal("the command in tmux is not running")
	}
	run("cocoonbox", "localbox", "stop")
	// kill-server has signalled them when stop returns; give them a moment
	// to exit.
	for i := 0; ; i++ {
		out, err := exec.Command("pgrep", "-af", marker).Output()
		if err != nil {
			break
		}
		if i == 100 {
			t.Fatalf("after stop, still running:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
