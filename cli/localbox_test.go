package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	t.Cleanup(func() {
		c := exec.Command("cocoonbox", "localbox", "stop")
		c.Env = env
		c.Run()
	})
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

// TestLocalboxStaleRuntimeFile: a localbox.json left by a local box that
// died, naming a pid that now belongs to another process, neither stops
// start nor makes stop signal that process.
func TestLocalboxStaleRuntimeFile(t *testing.T) {
	home, err := os.MkdirTemp("", "lb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	state := filepath.Join(home, ".local", "state", "cocoonbox", "localbox")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	bystander := exec.Command("sleep", "60")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })
	stale := fmt.Sprintf(`{"pid":%d,"endpoint":"unix://%s/localbox.sock"}`, bystander.Process.Pid, state)
	if err := os.WriteFile(filepath.Join(state, "localbox.json"), []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) (string, error) {
		c := exec.Command(name, args...)
		c.Env = env
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := run("cocoonbox", "localbox", "stop"); err != nil || !strings.Contains(out, "not running") {
		t.Errorf("stop with a stale file: %v\n%s", err, out)
	}
	if bystander.ProcessState != nil || bystander.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("stop signalled the process the stale file named")
	}
	if out, err := run("cocoonbox", "localbox", "start"); err != nil {
		t.Fatalf("start with a stale file: %v\n%s", err, out)
	}
	t.Cleanup(func() { run("cocoonbox", "localbox", "stop") })
	if out, err := run("cocoonbox-ssh", "main", "echo", "up"); err != nil || out != "up\n" {
		t.Errorf("after start: %v %q", err, out)
	}
}
