//go:build unix

package proc

import (
	"os/exec"
	"syscall"
	"testing"
)

func TestSignalNum(t *testing.T) {
	for name, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "hup": syscall.SIGHUP, "KILL": syscall.SIGKILL, "NOPE": 0, "SIGTERM": 0} {
		if got := SignalNum(name); got != want {
			t.Errorf("SignalNum(%q) = %v, want %v", name, got, want)
		}
	}
}

// A child in a session of its own is reached through its group, and its
// end by a signal is named without SIG.
func TestSessionSignalGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 600 & wait")
	NewSession(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !Alive(cmd.Process.Pid) {
		t.Error("Alive = false for a running child")
	}
	if err := SignalGroup(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if got := ExitSignal(cmd.ProcessState); got != "TERM" {
		t.Errorf("ExitSignal = %q, want TERM", got)
	}
	if Alive(cmd.Process.Pid) {
		t.Error("Alive = true for a reaped child")
	}
	ok := exec.Command("true")
	ok.Run()
	if got := ExitSignal(ok.ProcessState); got != "" {
		t.Errorf("ExitSignal of a clean exit = %q", got)
	}
}
