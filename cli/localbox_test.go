package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// TestLocalboxStopEndsTmux: `localbox stop` ends the boxes' tmux servers
// and what runs in them, not only the server process. The HOME is short:
// tmux's socket path must fit in 107 bytes.
func TestLocalboxStopEndsTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing: run scripts/deps.sh")
	}
	home := shortHome(t)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COCOONBOX_CLAIMS_DIR=" + filepath.Join(home, ".claims")}
	run := runner(t, env)
	run("cocoonbox", "localbox", "start")
	stopAtCleanup(t, env)
	marker := "sleep 4243" + filepath.Base(home)[2:]
	run("cocoonbox-ssh", "main", "tmux new-session -d -s keep '"+marker+"'")
	if exec.Command("pgrep", "-f", marker).Run() != nil {
		t.Fatal("the command in tmux is not running")
	}
	run("cocoonbox", "localbox", "stop")
	// kill-server has signalled them when stop returns; give them a moment
	// to exit.
	for i := 0; ; i++ {
		out, err := exec.Command("pgrep", "-af", marker).Output()
		if err != nil {
			break
		}
		if i == 100 {
			t.Fatalf("after stop, still running:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLocalboxStaleRuntimeFile: a localbox.json left by a local box that
// died, naming a pid that now belongs to another process, neither stops
// start nor makes stop signal that process.
func TestLocalboxStaleRuntimeFile(t *testing.T) {
	home := shortHome(t)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COCOONBOX_CLAIMS_DIR=" + filepath.Join(home, ".claims")}
	state := filepath.Join(home, ".local", "state", "cocoonbox", "localbox")
	// 0711 as the local box would make them: the box user must reach them.
	if err := os.MkdirAll(state, 0o711); err != nil {
		t.Fatal(err)
	}
	bystander := exec.Command("sleep", "60")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })
	stale := fmt.Sprintf(`{"pid":%d,"endpoint":"unix://%s/localbox.sock"}`, bystander.Process.Pid, state)
	if err := os.WriteFile(filepath.Join(state, "localbox.json"), []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) (string, error) {
		c := exec.Command(name, args...)
		c.Env = env
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := run("cocoonbox", "localbox", "stop"); err != nil || !strings.Contains(out, "not running") {
		t.Errorf("stop with a stale file: %v\n%s", err, out)
	}
	if bystander.ProcessState != nil || bystander.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("stop signalled the process the stale file named")
	}
	if out, err := run("cocoonbox", "localbox", "start"); err != nil {
		t.Fatalf("start with a stale file: %v\n%s", err, out)
	}
	t.Cleanup(func() { run("cocoonbox", "localbox", "stop") })
	if out, err := run("cocoonbox-ssh", "main", "echo", "up"); err != nil || out != "up\n" {
		t.Errorf("after start: %v %q", err, out)
	}
}

// TestLocalboxKill9: a local box killed with kill -9 leaves a box command
// that writes nothing and the offload inbox running; the next start ends
// both and starts an inbox that stays up. A command left in the background
// does not outlive stop. Box commands get no descriptor but their stdio,
// even from a start that had more open (as a shell may pass).
func TestLocalboxKill9(t *testing.T) {
	home := shortHome(t)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COCOONBOX_CLAIMS_DIR=" + filepath.Join(home, ".claims")}
	state := filepath.Join(home, ".local", "state", "cocoonbox", "localbox")
	ws := filepath.Join(state, "boxes", "main", "workspace")
	run := runner(t, env)
	// start with an extra descriptor open, not close-on-exec.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	start := exec.Command("cocoonbox", "localbox", "start")
	start.Env, start.ExtraFiles = env, []*os.File{r, w}
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	stopAtCleanup(t, env)
	if fds := run("cocoonbox-ssh", "main", "ls /proc/$$/fd; true"); fds != "0\n1\n2\n" {
		t.Errorf("a box command's descriptors:\n%s want only 0, 1 and 2", fds)
	}

	server := serverPID(t, state)
	inbox := inboxPID(t, state, 1)
	sleeper := exec.Command("cocoonbox-ssh", "main", "echo $$ > sleep.pid; exec sleep 600")
	sleeper.Env = env
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	sleep := waitPID(t, filepath.Join(ws, "sleep.pid"))
	if p, err := os.FindProcess(server); err != nil || p.Kill() != nil {
		t.Fatalf("kill -9 %d: %v", server, err)
	}
	sleeper.Wait()
	if !alive(sleep) || !alive(inbox) {
		t.Fatalf("after kill -9 of the server: box command alive %v, inbox alive %v; want both (else this test shows nothing)", alive(sleep), alive(inbox))
	}

	run("cocoonbox", "localbox", "start")
	if alive(sleep) {
		t.Errorf("after the next start, the box command (pid %d) the dead server left still runs", sleep)
	}
	if alive(inbox) {
		t.Errorf("after the next start, the inbox (pid %d) the dead server left still runs", inbox)
	}
	log := readFile(t, filepath.Join(state, "localbox.log"))
	if !strings.Contains(log, "ended 2 process groups a previous local box left behind") {
		t.Errorf("the log does not say what start ended:\n%s", log)
	}
	if inbox2 := inboxPID(t, state, 2); !alive(inbox2) {
		t.Errorf("the new inbox (pid %d) exited:\n%s", inbox2, readFile(t, filepath.Join(state, "boxes", "main", "inbox.log")))
	}

	run("cocoonbox-ssh", "main", "sleep 600 </dev/null >/dev/null 2>&1 & echo $! > bg.pid")
	bg := waitPID(t, filepath.Join(ws, "bg.pid"))
	if !alive(bg) {
		t.Fatal("the background command is not running")
	}
	run("cocoonbox", "localbox", "stop")
	if alive(bg) {
		t.Errorf("after stop, the background command (pid %d) still runs", bg)
	}
}

// TestLocalboxStartAfterDying: a local box that dies as start reaches it
// is replaced, not reported unreachable. A server killed with kill -9 a
// moment before still holds its lock and listener while the kernel closes
// its descriptors: its clients have seen their connections end, so it
// looks dead, but start found it serving, connected, and was reset as the
// listener closed (TestLocalboxKill9 failed so under load). Here this
// test is that server: it holds the lock, names itself in localbox.json,
// and at the first connection closes it, the listener and the lock.
func TestLocalboxStartAfterDying(t *testing.T) {
	home := shortHome(t)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COCOONBOX_CLAIMS_DIR=" + filepath.Join(home, ".claims")}
	state := filepath.Join(home, ".local", "state", "cocoonbox", "localbox")
	if err := localbox.MkdirState(state); err != nil {
		t.Fatal(err)
	}
	lock, err := localbox.Lock(state)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	lis, ep, err := localbox.Listen(state, "")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if err := localbox.WriteRuntime(state, localbox.Runtime{PID: os.Getpid(), Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	go func() {
		if c, err := lis.Accept(); err == nil {
			c.Close()
		}
		lis.Close()
		lock.Close()
	}()
	run := runner(t, env)
	run("cocoonbox", "localbox", "start")
	stopAtCleanup(t, env)
	if pid := serverPID(t, state); pid == os.Getpid() {
		t.Fatal("start took the dead local box's localbox.json")
	}
	if out := run("cocoonbox-ssh", "main", "echo", "up"); out != "up\n" {
		t.Errorf("after start: %q", out)
	}
}

// shortHome is a throw-away HOME under the system's temporary directory,
// removed when t ends: shorter than t.TempDir, so that the sockets in it
// (tmux's must fit in 107 bytes) fit.
func shortHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "lb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	reachable(t, home)
	return home
}

// reachable, run by root, lets the box user search dirs and our binaries'
// directory: served by root, a local box runs box commands as the box
// user, never as root, and refuses to start where that user cannot reach
// its state directory or cocoonbox-agent. Each test's env names a claims
// directory of its own (COCOONBOX_CLAIMS_DIR), so that the local boxes of
// tests that run at once may each claim the box user.
func reachable(t *testing.T, dirs ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	bin, err := exec.LookPath("cocoonbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := openToBoxUser(append(dirs, filepath.Dir(filepath.Dir(bin)), filepath.Dir(bin))...); err != nil {
		t.Fatal(err)
	}
}

// serverPID is the pid of the local box serving state.
func serverPID(t *testing.T, state string) int {
	t.Helper()
	var ri struct{ PID int }
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(state, "localbox.json"))), &ri); err != nil || ri.PID <= 0 {
		t.Fatalf("localbox.json: %v", err)
	}
	return ri.PID
}

// inboxPID is the pid of the nth "inbox started" in the local box's log.
func inboxPID(t *testing.T, state string, n int) int {
	t.Helper()
	m := regexp.MustCompile(`box main: inbox started \(pid (\d+)\)`).FindAllStringSubmatch(readFile(t, filepath.Join(state, "localbox.log")), -1)
	if len(m) < n {
		t.Fatalf("the log has %d inbox starts, want %d:\n%s", len(m), n, readFile(t, filepath.Join(state, "localbox.log")))
	}
	pid, _ := strconv.Atoi(m[n-1][1])
	return pid
}

// stopAtCleanup stops the local box of env's HOME when the test ends,
// whatever it fails on.
func stopAtCleanup(t *testing.T, env []string) {
	t.Cleanup(func() {
		c := exec.Command("cocoonbox", "localbox", "stop")
		c.Env = env
		c.Run()
	})
}

// runner returns a func that runs a command with env and returns its
// output, failing the test if it fails.
func runner(t *testing.T, env []string) func(name string, args ...string) string {
	return func(name string, args ...string) string {
		t.Helper()
		c := exec.Command(name, args...)
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}
