package cli_test

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
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
