package localbox

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leaderExitVar, when set to a socket path, makes this test binary (as
// TestExitedWaitsForThreads starts it) listen there and then end only its
// leader thread: the state a Go process killed with SIGKILL passes through
// when its leader thread dies first.
const leaderExitVar = "LOCALBOX_TEST_LEADER_EXIT"

func init() {
	sock := os.Getenv(leaderExitVar)
	if sock == "" {
		return
	}
	if _, err := net.Listen("unix", sock); err != nil {
		os.Exit(3)
	}
	// During init the main goroutine runs on the leader thread: exit(2)
	// (not exit_group) ends that thread alone.
	syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
}

// exited is not fooled by a process whose leader thread is a zombie while
// its other threads still hold its descriptors: sweep waits on it so that
// a killed inbox's socket is closed before the next inbox starts.
func TestExitedWaitsForThreads(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), leaderExitVar+"="+sock)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	pid := c.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st := stat(pid); len(st) > 0 && st[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child's leader thread did not exit: %v", stat(pid))
		}
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the child's socket does not answer (else this test shows nothing): %v", err)
	}
	conn.Close()
	if exited(pid) {
		t.Errorf("exited(%d) with the leader a zombie and %s threads left holding a listening socket", pid, stat(pid)[17])
	}

	syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); !exited(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after SIGKILL, not exited: %v", stat(pid))
		}
	}
	if conn, err := net.Dial("unix", sock); err == nil {
		conn.Close()
		t.Error("exited, yet the socket still answers")
	}
}

// stat is pid's /proc/PID/stat from field 3 (state) on, or nil.
func stat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}
