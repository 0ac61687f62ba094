package localbox

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The exec socket's second layer: a process of the host (this test) is
// refused, one in a pid namespace of its own, as a container's
// processes are, is taken.
func TestExecPeer(t *testing.T) {
	if err := execPeer(os.Getpid()); err == nil {
		t.Error("a process of the host was taken as a box's exec server")
	}
	if os.Geteuid() != 0 {
		t.Skip("a pid namespace of its own needs root")
	}
	cmd := exec.Command("unshare", "--pid", "--fork", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// The sleep is unshare's child, in the new namespace.
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
		if f := strings.Fields(string(b)); len(f) > 0 {
			child, _ = strconv.Atoi(f[0])
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare started no child")
		}
	}
	if err := execPeer(child); err != nil {
		t.Errorf("a process in a pid namespace of its own: %v", err)
	}
}
