package cli_test

import (
	"bufio"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// started runs cocoonbox-ssh with args against b and returns once it has
// written a line containing ready to stdout (or, with fromStderr, stderr),
// with the rest of that stream, which the caller must read to its end, and
// the other stream as it fills.
func started(t *testing.T, b *testBox, ready string, fromStderr bool, args ...string) (*exec.Cmd, *bufio.Reader, *strings.Builder) {
	t.Helper()
	shim, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(shim, args...)
	cmd.Env = b.Env
	var pipe io.ReadCloser
	other := &strings.Builder{}
	if fromStderr {
		pipe, err = cmd.StderrPipe()
		cmd.Stdout = other
	} else {
		pipe, err = cmd.StdoutPipe()
		cmd.Stderr = other
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(pipe)
	readUntil(t, r, ready)
	return cmd, r, other
}

func readUntil(t *testing.T, r *bufio.Reader, s string) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if strings.Contains(line, s) {
			return
		}
		if err != nil {
			t.Fatalf("no %q before %v", s, err)
		}
	}
}

// TestSSHSignalsForwarded: without a terminal, the first INT, TERM or HUP
// goes to the remote command, whose status then comes back; a second one
// ends cocoonbox-ssh with 255 (DESIGN.md, "signals").
func TestSSHSignalsForwarded(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		cmd, out, _ := started(t, b, "READY", false, "main", `trap 'exit 7' INT TERM HUP; echo READY; while :; do sleep 0.1; done`)
		go io.Copy(io.Discard, out)
		cmd.Process.Signal(sig)
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 7 {
			t.Errorf("%v: exit status %d, want the remote's 7", sig, code)
		}
	}

	// The second signal goes only once the first is seen to have arrived:
	// two sent at once may reach the process as one.
	cmd, out, _ := started(t, b, "READY", false, "main", `trap 'echo ignored' TERM; echo READY; while :; do sleep 0.1; done`)
	cmd.Process.Signal(syscall.SIGTERM)
	readUntil(t, out, "ignored")
	go io.Copy(io.Discard, out)
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 255 {
		t.Errorf("after two signals: exit status %d, want 255", code)
	}
}

// TestSSHNoCommand: -N wakes the box and waits; SIGTERM ends it with 0 and
// other signals with 255, as ssh -N.
func TestSSHNoCommand(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	for sig, want := range map[syscall.Signal]int{syscall.SIGTERM: 0, syscall.SIGINT: 255, syscall.SIGHUP: 255} {
		cmd, stderr, stdout := started(t, b, "waiting for a signal", true, "-N", "-v", "main")
		go io.Copy(io.Discard, stderr)
		cmd.Process.Signal(sig)
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != want {
			t.Errorf("-N then %v: exit status %d, want %d", sig, code, want)
		}
		if stdout.Len() > 0 {
			t.Errorf("-N wrote %q to stdout", stdout)
		}
	}
}

// waitExit waits for cmd, failing the test if it takes over 30 s, and
// returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("cocoonbox-ssh did not exit")
		return -1
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestSSHSignalPastUnreadStdin: a signal reaches a remote command that
// reads none of the megabytes waiting on its stdin, as ssh's does.
func TestSSHSignalPastUnreadStdin(t *testing.T) {
	b := startBox(t)
	cmd := exec.Command("cocoonbox-ssh", "main", `trap 'echo got INT; exit 7' INT; echo ready; while :; do sleep 0.05; done`)
	cmd.Env = b.Env
	cmd.Stdin = io.LimitReader(zeroReader{}, 64<<20)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	readUntil(t, r, "ready")
	// Let the stdin backlog fill every window on the way.
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	readUntil(t, r, "got INT")
	if code := waitExit(t, cmd); code != 7 {
		t.Errorf("exit %d, want the remote's 7", code)
	}
}

// TestSSHIgnoredSignalStaysIgnored: under nohup (HUP ignored when we
// start), a HUP neither ends us nor reaches the box, as with ssh.
func TestSSHIgnoredSignalStaysIgnored(t *testing.T) {
	b := startBox(t)
	cmd := exec.Command("sh", "-c", `trap "" HUP; exec cocoonbox-ssh main 'echo ready; sleep 1; echo survived'`)
	cmd.Env = b.Env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	readUntil(t, r, "ready")
	cmd.Process.Signal(syscall.SIGHUP)
	readUntil(t, r, "survived")
	if code := waitExit(t, cmd); code != 0 {
		t.Errorf("exit %d after an ignored HUP, want 0", code)
	}
}

// TestSSHQuit: SIGQUIT ends the shim with 255 and says nothing (no Go
// stack dump), as ssh.
func TestSSHQuit(t *testing.T) {
	b := startBox(t)
	cmd, r, stderr := started(t, b, "ready", false, "main", "echo ready; sleep 30")
	go io.Copy(io.Discard, r)
	cmd.Process.Signal(syscall.SIGQUIT)
	if code := waitExit(t, cmd); code != 255 {
		t.Errorf("exit %d after SIGQUIT, want 255", code)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr after SIGQUIT: %q", stderr.String())
	}
}

// TestSSHSignalWhileConnecting: a signal while the endpoint has not
// answered ends the shim with 255 at once, as ssh does while connecting.
func TestSSHSignalWhileConnecting(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := lis.Accept(); err == nil {
			accepted <- c // and never answer
		}
	}()
	cmd := exec.Command("cocoonbox-ssh", "main", "true")
	cmd.Env = []string{"HOME=" + t.TempDir(), "COCOONBOX_ENDPOINT=http://" + lis.Addr().String(),
		"COCOONBOX_TOKEN=cb_" + strings.Repeat("0", 64)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("the shim never connected")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, cmd); code != 255 {
		t.Errorf("exit %d after SIGTERM while connecting, want 255", code)
	}
}
