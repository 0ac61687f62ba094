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
// has created the file ready in the workspace.
func startShim(t *testing.T, line string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
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
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(ws, "ready")); err == nil {
			return cmd, &stdout, &stderr
		}
		if i == 1000 {
			t.Fatalf("the remote command never became ready; stderr: %s", stderr.String())
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
			cmd, stdout, stderr := startShim(t, `trap 'echo caught; exit 7' INT TERM HUP; touch ready; while :; do sleep 0.05; done`)
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
	cmd, _, stderr := startShim(t, `trap '' INT; touch ready; while :; do sleep 0.05; done`)
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Process.Signal(syscall.SIGINT)
	if got := exitCode(t, cmd); got != 255 {
		t.Errorf("exit %d after a second SIGINT, want 255; stderr: %s", got, stderr)
	}
}
