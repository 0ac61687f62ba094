package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// scripts/deps.sh waits for the package locks another apt-get holds
// (unattended-upgrades, a second deps.sh) instead of failing at once:
// apt-get update for the lists' lock, apt-get install for dpkg's. The
// real apt-get runs on a private apt state (APT_CONFIG: its own lists,
// no sources, a copy of dpkg's status), asked for tar, which that status
// has installed, so nothing is fetched or installed. Before, each failed
// at once with "Could not get lock".
func TestDepsWaitsForAptLocks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("deps.sh installs only as root; as another user it prints the commands")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Fatal("apt-get is missing: deps.sh is for Debian")
	}
	dir := t.TempDir()
	for _, d := range []string{"lists/partial", "cache/archives/partial", "dpkg", "sources.list.d", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	status, err := os.ReadFile("/var/lib/dpkg/status")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dpkg", "status"), status, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "apt.conf")
	text := strings.NewReplacer("D/", dir+"/").Replace(`Dir::State::Lists "D/lists/";
Dir::State::status "D/dpkg/status";
Dir::Cache "D/cache/";
Dir::Etc::sourcelist "/dev/null";
Dir::Etc::sourceparts "D/sources.list.d/";
Dir::Log "D/log/";
`)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	lists := holdLock(t, filepath.Join(dir, "lists", "lock"))
	dpkg := holdLock(t, filepath.Join(dir, "dpkg", "lock-frontend"))

	cmd := exec.Command("bash", "../scripts/deps.sh", "test", "tar")
	cmd.Env = append(os.Environ(), "APT_CONFIG="+conf)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Each lock is let go once deps.sh is seen waiting for it; a deps.sh
	// that ends first failed at the lock.
	waitWhileRunning(t, exited, &stderr, "the lists' lock", func() bool {
		return strings.Contains(stderr.String(), "holds the package lists' lock; waiting")
	})
	lists.Close()
	waitWhileRunning(t, exited, &stderr, "dpkg's lock", func() bool { return aptInstallWaiting(conf) })
	dpkg.Close()
	if err := <-exited; err != nil {
		t.Fatalf("deps.sh: %v\n%s", err, stderr.String())
	}
}

// holdLock takes the fcntl write lock apt and dpkg take on path, as
// another apt-get would, until the file is closed.
func holdLock(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitWhileRunning polls cond until it holds, failing the test if the
// command ends first.
func waitWhileRunning(t *testing.T, exited chan error, stderr *syncBuffer, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case err := <-exited:
			t.Fatalf("deps.sh ended (%v) before it waited for %s:\n%s", err, what, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// aptInstallWaiting reports whether an apt-get install with the
// APT_CONFIG conf sleeps: apt sleeps only between its tries of a lock.
func aptInstallWaiting(conf string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		args, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(args, []byte("apt-get\x00")) || !bytes.Contains(args, []byte("\x00install\x00")) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		wchan, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "wchan"))
		if bytes.Contains(env, []byte("APT_CONFIG="+conf+"\x00")) && bytes.Contains(wchan, []byte("nanosleep")) {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
