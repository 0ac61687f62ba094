package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLocalboxSetsid: a box command that leaves its process group
// (setsid, as a daemon does) is ended by stop, and, after a kill -9 of
// the server, by the next start: it carries the state directory in
// COCOONBOX_LOCALBOX, which the server looks for in /proc.
func TestLocalboxSetsid(t *testing.T) {
	home := shortHome(t)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COCOONBOX_CLAIMS_DIR=" + filepath.Join(home, ".claims"), "COCOONBOX_CONTROL_PERSIST=no"}
	state := filepath.Join(home, ".local", "state", "cocoonbox", "localbox")
	ws := filepath.Join(state, "boxes", "main", "workspace")
	run := runner(t, env)
	run("cocoonbox", "localbox", "start")
	stopAtCleanup(t, env)
	daemon := func(name string) int {
		run("cocoonbox-ssh", "main", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > "+name)
		pid := waitPID(t, filepath.Join(ws, name))
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		if !alive(pid) {
			t.Fatalf("the setsid command (pid %d) is not running", pid)
		}
		return pid
	}
	d1 := daemon("d1.pid")
	run("cocoonbox", "localbox", "stop")
	if alive(d1) {
		t.Errorf("after stop, a box command that left its process group (pid %d) still runs", d1)
	}

	run("cocoonbox", "localbox", "start")
	d2 := daemon("d2.pid")
	server := serverPID(t, state)
	if p, err := os.FindProcess(server); err != nil || p.Kill() != nil {
		t.Fatalf("kill -9: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && alive(server); time.Sleep(20 * time.Millisecond) {
	}
	if !alive(d2) {
		t.Fatal("the setsid command died with the server (else this test shows nothing)")
	}
	run("cocoonbox", "localbox", "start")
	if alive(d2) {
		t.Errorf("after the next start, the setsid command (pid %d) the dead server left still runs", d2)
	}
	if log := readFile(t, filepath.Join(state, "localbox.log")); !strings.Contains(log, "outside their process groups") {
		t.Errorf("the log does not say what start ended:\n%s", log)
	}
}
