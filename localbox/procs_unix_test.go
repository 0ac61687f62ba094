//go:build linux || darwin

package localbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// sweep ends a recorded group whose leader is the one recorded, and leaves
// alone a live process whose start time differs (a pid reused since).
func TestSweepChecksStartTime(t *testing.T) {
	s := &Server{Dir: t.TempDir()}
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	ours, other := start(), start()
	s.recordProc(&box{boxMeta: boxMeta{ID: "box_1"}}, ours.Process.Pid)
	fake := filepath.Join(s.procsDir(), strconv.Itoa(other.Process.Pid))
	if err := os.WriteFile(fake, []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := s.sweep(0); n != 1 {
		t.Errorf("sweep ended %d groups, want 1", n)
	}
	if err := ours.Wait(); err == nil {
		t.Error("the recorded command was not killed")
	}
	if exited(other.Process.Pid) {
		t.Error("sweep killed a process whose start time differs from the record")
	}
	if ents, _ := os.ReadDir(s.procsDir()); len(ents) != 0 {
		t.Errorf("records left: %v", ents)
	}
}
