package offload

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// A back killed in its merge (kill -9) leaves index.lock: the next back
// removes it, knowing it by its mark (a link to it named for the dead
// pid); a lock whose holder runs, or that has no mark of ours (git's
// own), stays and is refused as locked.
func TestStaleIndexLock(t *testing.T) {
	r := newRepo(t, testEnv(t), map[string]string{"a.txt": "a\n"})
	lockPath := filepath.Join(r.GitDir, "index.lock")
	plant := func(pid int) {
		t.Helper()
		if err := os.WriteFile(lockPath, []byte("half an index"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(lockPath, lockPath+lockMarkPrefix+strconv.Itoa(pid)); err != nil {
			t.Fatal(err)
		}
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	plant(dead.Process.Pid)
	l, err := r.lockIndex()
	if err != nil {
		t.Fatalf("a lock our dead back left: %v", err)
	}
	l.release()
	if m, _ := filepath.Glob(lockPath + lockMarkPrefix + "*"); len(m) != 0 {
		t.Errorf("marks left: %v", m)
	}

	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	plant(live.Process.Pid)
	if _, err := r.lockIndex(); !errors.Is(err, ErrIndexLocked) {
		t.Errorf("a lock whose back still runs: %v, want ErrIndexLocked", err)
	}
	os.Remove(lockPath)
	os.Remove(lockPath + lockMarkPrefix + strconv.Itoa(live.Process.Pid))

	// git's own lock, with a mark of a dead back of ours beside it that
	// is another file: the lock stays.
	if err := os.WriteFile(lockPath, []byte("git's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lockPath+lockMarkPrefix+strconv.Itoa(dead.Process.Pid), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.lockIndex(); !errors.Is(err, ErrIndexLocked) {
		t.Errorf("git's own lock: %v, want ErrIndexLocked", err)
	}
	if _, err := os.Stat(lockPath); err != nil {
		t.Errorf("git's own lock was removed: %v", err)
	}
}
