//go:build unix

package localbox

import (
	"os"
	"os/exec"
	"testing"
)

// TestStopKilledServer: Stop of a local box that was killed as it was
// read (ReadRuntime found its process and lock; it then ended without
// removing its Runtime file, as after kill -9) returns once the process
// and the lock are gone, and removes the file, rather than waiting out
// stopTimeout and failing. Here the server is a sleep, and this test
// holds the lock for it until it exits.
func TestStopKilledServer(t *testing.T) {
	dir := t.TempDir()
	lock, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	srv := exec.Command("sleep", "60")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill() })
	go func() {
		srv.Wait()
		lock.Close()
	}()
	ri := Runtime{PID: srv.Process.Pid, Endpoint: "unix://" + SocketPath(dir)}
	if err := WriteRuntime(dir, ri); err != nil {
		t.Fatal(err)
	}
	if _, ok := ReadRuntime(dir); !ok {
		t.Fatal("ReadRuntime does not see the server")
	}
	if err := Stop(dir, ri); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(RuntimePath(dir)); !os.IsNotExist(err) {
		t.Errorf("the Runtime file stays: %v", err)
	}
}
