package cli_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// freezer is a TCP proxy that can stop forwarding while keeping its
// connections open: to the client the box looks alive to TCP but silent,
// as behind a dead NAT or a suspended laptop's network.
type freezer struct {
	lis    net.Listener
	mu     sync.Mutex
	frozen bool
	// accepted counts the connections; those numbered below frozenBelow
	// are frozen (freezeOpen), whatever frozen says.
	accepted, frozenBelow int
	thaw                  chan struct{} // closed when the test ends
}

func startFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{lis: lis, thaw: make(chan struct{})}
	t.Cleanup(func() {
		close(f.thaw)
		lis.Close()
	})
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			id := f.accepted
			f.accepted++
			f.mu.Unlock()
			go f.pipe(c, u, id)
			go f.pipe(u, c, id)
		}
	}()
	return f
}

// behindFreezer is a box (startBox with options) and a freezer in front
// of it, which f.shim's commands go through.
func behindFreezer(t *testing.T, options ...func(*localbox.Server)) (*testBox, *freezer) {
	t.Helper()
	b := startBox(t, options...)
	return b, startFreezer(t, b.Addr)
}

// pipe copies from src to dst until an error, holding data once frozen.
func (f *freezer) pipe(dst, src net.Conn, id int) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		f.mu.Lock()
		frozen := f.frozen || id < f.frozenBelow
		f.mu.Unlock()
		if frozen {
			<-f.thaw
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// freezeOpen freezes the connections open now; new ones still flow, as
// after a laptop moved to another network.
func (f *freezer) freezeOpen() {
	f.mu.Lock()
	f.frozenBelow = f.accepted
	f.mu.Unlock()
}

// shim is cocoonbox-ssh main LINE, through f, with COCOONBOX_KEEPALIVE=keepalive.
func (f *freezer) shim(t *testing.T, b *testBox, line, keepalive string) *exec.Cmd {
	t.Helper()
	shim, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(shim, "main", line)
	cmd.Env = append(append([]string{}, b.Env...), "COCOONBOX_ENDPOINT=http://"+f.lis.Addr().String(), "COCOONBOX_KEEPALIVE="+keepalive)
	return cmd
}

// TestSSHKeepalive: when the connection stops answering mid-command, the
// gRPC keepalive (shortened with COCOONBOX_KEEPALIVE) ends cocoonbox-ssh
// with 255 and one line instead of a hang.
func TestSSHKeepalive(t *testing.T) {
	t.Parallel()
	b, f := behindFreezer(t)
	msg := f.frozenCall(t, f.shim(t, b, "echo started; exec sleep 600", "10s,1s"))
	if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "cocoonbox-ssh: ") || !strings.Contains(msg, "keepalive") {
		t.Errorf("stderr %q, want one line naming the keepalive", msg)
	}
}

// frozenCall runs cmd, which prints "started" first, freezes f once that
// arrives, checks that cmd then exits 255, and returns its stderr.
func (f *freezer) frozenCall(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "started\n" {
		t.Fatalf("first line %q, %v; stderr: %s", line, err, stderr.String())
	}
	f.freeze()
	io.Copy(io.Discard, stdout)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 255 {
		t.Errorf("exit status %d, want 255", code)
	}
	t.Logf("stderr: %q", stderr.String())
	return stderr.String()
}

// TestServerKeepalive: when a client's link freezes, the server's own
// keepalive (shortened here to 1 s + 1 s) drops that client and ends its
// command, one that writes nothing, while the client itself still waits
// on its much longer keepalive.
func TestServerKeepalive(t *testing.T) {
	t.Parallel()
	b, f := behindFreezer(t, func(s *localbox.Server) { s.KeepaliveTime, s.KeepaliveTimeout = time.Second, time.Second })
	cmd := f.shim(t, b, "echo $$ > sleep.pid; echo started; exec sleep 600", "600s,600s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	pid := waitPID(t, filepath.Join(b.Workspace, "sleep.pid"))
	if !alive(pid) {
		t.Fatalf("the box command (pid %d) is not running", pid)
	}
	f.freeze()
	for deadline := time.Now().Add(time.Minute); alive(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the link froze, the box command (pid %d) still runs", pid)
		}
	}
	select {
	case <-exited:
		t.Fatal("the client gave up first: this test shows nothing of the server's keepalive")
	default:
	}
}

// waitPID reads the pid a box command wrote to file, waiting for it.
func waitPID(t *testing.T, file string) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(file)
		if pid, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil && strings.HasSuffix(string(b), "\n") {
			return pid
		}
	}
	t.Fatalf("%s did not appear", file)
	return 0
}

// alive reports whether process pid runs: it exists and is no zombie (an
// orphan's parent may be slow to reap it).
func alive(pid int) bool {
	if p, err := os.FindProcess(pid); err != nil || p.Signal(syscall.Signal(0)) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

// TestSSHKeepaliveUpload: the same holds while stdin is being sent (the
// client blocked on flow control, the box silent): 255 and one line. It
// may come sooner, from the kernel: gRPC sets TCP_USER_TIMEOUT to the
// keepalive's TIMEOUT, which also bounds data left unacknowledged.
func TestSSHKeepaliveUpload(t *testing.T) {
	t.Parallel()
	b, f := behindFreezer(t)
	uploadFrozen(t, f, f.shim(t, b, "head -c 1 >/dev/null && echo started && cat > /dev/null", "10s,1s"))
}

// TestSSHKeepaliveUploadTLS is TestSSHKeepaliveUpload over TLS, where the
// client's records are held and written at once (internal/cork), so that
// a write blocked on the frozen link may sit outside crypto/tls's Write.
func TestSSHKeepaliveUploadTLS(t *testing.T) {
	t.Parallel()
	b, f, caFile := behindFreezerTLS(t)
	cmd := f.shim(t, b, "head -c 1 >/dev/null && echo started && cat > /dev/null", "10s,1s")
	cmd.Env = append(cmd.Env, "COCOONBOX_ENDPOINT=https://"+f.lis.Addr().String(), "COCOONBOX_CA_FILE="+caFile)
	uploadFrozen(t, f, cmd)
}

// behindFreezerTLS is behindFreezer with the box serving TLS, its
// certificate for 127.0.0.1 from a test CA whose file it returns.
func behindFreezerTLS(t *testing.T) (*testBox, *freezer, string) {
	t.Helper()
	ca := newTestCA(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "box.crt"), filepath.Join(dir, "box.key")
	if _, err := ca.issue(cert, key, []string{"127.0.0.1"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	tc, err := localbox.LoadTLS(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	b, f := behindFreezer(t, func(s *localbox.Server) { s.TLS = tc })
	return b, f, ca.file
}

// uploadFrozen runs cmd, which says started once a byte of its stdin
// arrived and then reads the rest, feeding it zeros, and wants the end a
// keepalive (or the kernel's TCP_USER_TIMEOUT) gives once f froze.
func uploadFrozen(t *testing.T, f *freezer, cmd *exec.Cmd) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		zeros := make([]byte, 64<<10)
		for {
			if _, err := stdin.Write(zeros); err != nil {
				return
			}
		}
	}()
	msg := f.frozenCall(t, cmd)
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "keepalive") && !strings.Contains(msg, "connection timed out") {
		t.Errorf("stderr %q, want one line naming the keepalive or the timeout", msg)
	}
}

// TestSSHKeepaliveThroughMaster: the same through a control master
// (docs/architecture.md "Connection sharing"): the master's connection is
// the one that freezes; its keepalive ends the call, whose client exits 255
// with the same one line, and the master exits with its connection.
func TestSSHKeepaliveThroughMaster(t *testing.T) {
	t.Parallel()
	b, f := behindFreezer(t)
	log := f.warmMaster(t, b)
	msg := f.frozenCall(t, f.logged(t, b, "echo started; exec sleep 600", log))
	if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "cocoonbox-ssh: ") || !strings.Contains(msg, "keepalive") && !strings.Contains(msg, "stopped answering") {
		t.Errorf("stderr %q, want one line naming the keepalive", msg)
	}
	waitLog(t, log, "exits: its connection to the endpoint failed")
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "via master") {
		t.Errorf("the call did not go through the master; the log:\n%s", b)
	}
}

// TestSharedLinkCheckedAfterIdle: a control master whose connection has
// carried nothing for a while checks it before the next call uses it
// (share.CheckMethod); a connection that died meanwhile (frozen here, as
// after a change of network) fails the check, the master exits, and the
// call dials the endpoint itself and succeeds, instead of waiting for a
// keepalive to fail it.
func TestSharedLinkCheckedAfterIdle(t *testing.T) {
	t.Parallel()
	b, f := behindFreezer(t)
	log := f.warmMaster(t, b)
	run := func(line string) (string, error) {
		out, err := f.logged(t, b, line, log).CombinedOutput()
		return string(out), err
	}
	if out, err := run("echo warm"); err != nil || out != "warm\n" {
		t.Fatalf("%v: %q", err, out)
	}
	time.Sleep(11 * time.Second) // past the master's probeAfter (share/master.go)
	f.freezeOpen()
	if out, err := run("echo after"); err != nil || out != "after\n" {
		t.Fatalf("after the link died: %v: %q", err, out)
	}
	b2, _ := os.ReadFile(log)
	for _, want := range []string{"via master", "direct; the master failed its check", "check: no answer from the endpoint", "exits"} {
		if !strings.Contains(string(b2), want) {
			t.Errorf("no %q in the control log:\n%s", want, b2)
		}
	}
}

// logged is f.shim with keepalive 10s,1s and the control log at log.
func (f *freezer) logged(t *testing.T, b *testBox, line, log string) *exec.Cmd {
	cmd := f.shim(t, b, line, "10s,1s")
	cmd.Env = append(cmd.Env, "COCOONBOX_CONTROL_LOG="+log, "COCOONBOX_CONTROL_MIN_RTT=0")
	return cmd
}

// warmMaster runs `true` through f, so that a control master starts, waits
// until it serves, and returns the control log's path.
func (f *freezer) warmMaster(t *testing.T, b *testBox) string {
	t.Helper()
	log := filepath.Join(t.TempDir(), "control.log")
	if out, err := f.logged(t, b, "true", log).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	waitLog(t, log, "serving")
	return log
}

// waitLog waits until the control log holds what, at most two minutes.
func waitLog(t *testing.T, log, what string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), what) {
			return
		}
	}
	b, _ := os.ReadFile(log)
	t.Fatalf("no %q in the control log:\n%s", what, b)
}

// TestSharedLinkDeadSoonAfterAnswer: a control master's connection that
// dies within 10 s of its last answer (so the master answers the check at
// once, without asking the endpoint) is found dead by the call that
// follows: the master asks the endpoint when the call's first answer is
// late, and the command ends with 255 and one line well before the
// keepalive (default 30s,15s here) would end it, instead of hanging
// about 43 s. Over TLS, as a real box is reached.
func TestSharedLinkDeadSoonAfterAnswer(t *testing.T) {
	t.Parallel()
	b, f, caFile := behindFreezerTLS(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "control.log")
	shim := func(line string) *exec.Cmd {
		cmd := f.shim(t, b, line, "")
		cmd.Env = append(cmd.Env, "COCOONBOX_ENDPOINT=https://"+f.lis.Addr().String(), "COCOONBOX_CA_FILE="+caFile,
			"COCOONBOX_CONTROL_LOG="+log, "COCOONBOX_CONTROL_MIN_RTT=0")
		return cmd
	}
	if out, err := shim("true").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	waitLog(t, log, "serving")
	if out, err := shim("echo warm").CombinedOutput(); err != nil || string(out) != "warm\n" {
		t.Fatalf("%v: %q", err, out)
	}
	f.freezeOpen()
	cmd := shim("echo after")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	begun := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	// A correctness deadline, not a speed test: the keepalive would take
	// some 43 s, the master's watch takes about 3.2 s (its wait of 200 ms
	// to 1 s, then the health check's 3 s), and issue 21 asks for 5 s;
	// measured 3.23 to 3.31 s with the machine's two cores busy (load 5).
	select {
	case err = <-done:
		t.Logf("the command ended after %v", time.Since(begun).Round(10*time.Millisecond))
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		b, _ := os.ReadFile(log)
		t.Fatalf("the command hung past 5 s on the dead link; stderr %q; the control log:\n%s", stderr.String(), b)
	}
	if err == nil {
		if stdout.String() != "after\n" {
			t.Errorf("stdout %q, want after", stdout.String())
		}
		return
	}
	if code := cmd.ProcessState.ExitCode(); code != 255 {
		t.Errorf("exit %d, want 0 or 255", code)
	}
	if msg := stderr.String(); strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "cocoonbox-ssh: ") {
		t.Errorf("stderr %q, want one line", msg)
	}
	t.Logf("exit 255: %s", stderr.String())
	waitLog(t, log, "exits")
}
