package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// startShim runs cocoonbox-ssh main line and waits until the remote command
// has created the file ready in the workspace, which it returns.
func startShim(t *testing.T, line string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, string) {
	t.Helper()
	env, ws := startBox(t)
	cmd := exec.Command("cocoonbox-ssh", "main", line)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitFile(t, filepath.Join(ws, "ready"))
	return cmd, &stdout, &stderr, ws
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	for i := 0; ; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if i == 3000 {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatal("cocoonbox-ssh did not exit")
		return -1
	}
}

func TestSignalsForwarded(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, stdout, stderr, _ := startShim(t, `trap 'echo caught; exit 7' INT TERM HUP; touch ready; while :; do sleep 0.05; done`)
			cmd.Process.Signal(sig)
			if got := exitCode(t, cmd); got != 7 {
				t.Errorf("exit %d, want the remote's 7; stderr: %s", got, stderr)
			}
			if stdout.String() != "caught\n" {
				t.Errorf("stdout %q, want the remote trap's line", stdout)
			}
		})
	}
}

func TestSecondSignalExits255(t *testing.T) {
	cmd, _, stderr, ws := startShim(t, `trap 'touch got' INT; touch ready; while :; do sleep 0.05; done`)
	cmd.Process.Signal(syscall.SIGINT)
	// The kernel merges a signal sent while the same one is pending, so the
	// second goes only once the first has reached the box.
	waitFile(t, filepath.Join(ws, "got"))
	cmd.Process.Signal(syscall.SIGINT)
	if got := exitCode(t, cmd); got != 255 {
		t.Errorf("exit %d after a second SIGINT, want 255; stderr: %s", got, stderr)
	}
}
