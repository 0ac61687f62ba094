package cli_test

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// shimCmd is cocoonbox-ssh ARGS against tb's box.
func shimCmd(tb *testBox, args ...string) *exec.Cmd {
	cmd := exec.Command("cocoonbox-ssh", args...)
	cmd.Env = tb.Env
	return cmd
}

// startLine starts cmd and returns once it has printed a first line on
// stdout; the process is killed when the test ends. Its stderr goes to
// the returned builder.
func startLine(t *testing.T, cmd *exec.Cmd) (string, *strings.Builder) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// stdin (unless the caller set it) stays open until the test ends, so
	// that a command that holds the session with `exec cat` ends when it
	// does: sshd does not end a command whose client went (a `sleep 600`
	// outlived every test run against the real sshd by ten minutes).
	var in io.Closer = io.NopCloser(nil)
	if cmd.Stdin == nil {
		if in, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		in.Close()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("%s: no first line: %v; stderr: %s", cmd.Args, err, stderr.String())
	}
	go io.Copy(io.Discard, out)
	return strings.TrimSpace(line), &stderr
}

// boxHTTP starts python3's http.server in the box, serving its workspace
// (with hello.txt) on 127.0.0.1, the box's loopback, and returns its port.
func boxHTTP(t *testing.T, tb *testBox) string {
	t.Helper()
	if out, err := shimCmd(tb, "main", "echo hello from the box > hello.txt").CombinedOutput(); err != nil {
		t.Fatalf("write hello.txt in the box: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	line, _ := startLine(t, shimCmd(tb, "main", "exec python3 -u -m http.server --bind 127.0.0.1 "+port))
	if !strings.HasPrefix(line, "Serving HTTP") {
		t.Fatalf("http.server said %q", line)
	}
	return port
}

func curl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS"}, args...)...).CombinedOutput()
	return string(out), err
}

func TestSSHForwardLocal(t *testing.T) {
	tb := startBox(t)
	httpPort := boxHTTP(t, tb)
	lp, _ := freePort()
	sock := filepath.Join(t.TempDir(), "http.sock")
	// The command starts only once the forwards listen.
	ready, stderr := startLine(t, shimCmd(tb, "-o", "ExitOnForwardFailure=yes", "-L", lp+":localhost:"+httpPort, "-L", sock+":127.0.0.1:"+httpPort, "main", "echo ready; exec sleep 600"))
	if ready != "ready" {
		t.Fatalf("got %q", ready)
	}
	for range 3 {
		got, err := curl(t, "http://127.0.0.1:"+lp+"/hello.txt")
		if err != nil || got != "hello from the box\n" {
			t.Fatalf("curl through -L: %q, %v; shim stderr: %s", got, err, stderr)
		}
	}
	// The unix-socket form: a local socket to the box's port.
	if got, err := curl(t, "--unix-socket", sock, "http://box/hello.txt"); err != nil || got != "hello from the box\n" {
		t.Errorf("curl through -L SOCKET:host:port: %q, %v; shim stderr: %s", got, err, stderr)
	}

	// A forward to a port nothing listens on: the connection is closed and
	// one line says why; the forward stays up.
	closed, _ := freePort()
	lp2, _ := freePort()
	_, stderr = startLine(t, shimCmd(tb, "-L", lp2+":127.0.0.1:"+closed, "main", "echo ready; exec sleep 600"))
	if _, err := curl(t, "http://127.0.0.1:"+lp2+"/"); err == nil {
		t.Error("curl to a refused forward succeeded")
	}
	if _, err := curl(t, "http://127.0.0.1:"+lp2+"/"); err == nil {
		t.Error("curl to a refused forward succeeded")
	}
	for _, want := range []string{"-L " + lp2, "connect to 127.0.0.1:" + closed + " in box main", "refused"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
}

func TestSSHForwardListenFailure(t *testing.T) {
	tb := startBox(t)
	spec := "127.0.0.1:" + usedPort(t) + ":localhost:80"

	// ExitOnForwardFailure: 255 and one line, and the command never runs.
	cmd := shimCmd(tb, "-o", "ExitOnForwardFailure=yes", "-L", spec, "main", "echo ran")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState.ExitCode() != 255 || stdout.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("ExitOnForwardFailure: exit %d (%v), stdout %q, stderr %q; want 255, nothing, one line", cmd.ProcessState.ExitCode(), err, stdout.String(), stderr.String())
	}
	// Without it, as ssh: a warning, and the command runs.
	cmd = shimCmd(tb, "-L", spec, "main", "echo ran")
	stdout.Reset()
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stdout.String() != "ran\n" || !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("without ExitOnForwardFailure: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
}

func TestSSHForwardDynamic(t *testing.T) {
	tb := startBox(t)
	httpPort := boxHTTP(t, tb)
	lp, _ := freePort()
	// As VS Code runs it: -T -D PORT and a shell reading its stdin.
	cmd := shimCmd(tb, "-T", "-D", lp, "main", "bash")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "echo ready\n")
	ready, stderr := startLine(t, cmd)
	if ready != "ready" {
		t.Fatalf("got %q", ready)
	}
	url := "http://localhost:" + httpPort + "/hello.txt"
	for _, proxy := range []string{"--socks5-hostname", "--socks5", "--socks4a", "--socks4"} {
		got, err := curl(t, proxy, "127.0.0.1:"+lp, url)
		if err != nil || got != "hello from the box\n" {
			t.Errorf("curl %s: %q, %v; shim stderr: %s", proxy, got, err, stderr)
		}
	}
	closed, _ := freePort()
	if got, err := curl(t, "--socks5-hostname", "127.0.0.1:"+lp, "http://localhost:"+closed+"/"); err == nil || !strings.Contains(got, "(5)") {
		// curl names the SOCKS5 reply code: 5 is "connection refused".
		t.Errorf("curl to a closed port through -D: %q, %v; want SOCKS5 reply 5, connection refused", got, err)
	}
	// The shell still runs; its EOF ends the run with its status.
	io.WriteString(stdin, "exit 7\n")
	stdin.Close()
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Errorf("exit %d, want the shell's 7; stderr: %s", code, stderr)
	}
}

func TestSSHForwardStdio(t *testing.T) {
	tb := startBox(t)
	httpPort := boxHTTP(t, tb)

	// An HTTP/1.0 request on stdin: its EOF is the half-close, and the
	// answer comes back on stdout.
	cmd := shimCmd(tb, "-W", "localhost:"+httpPort, "main")
	cmd.Stdin = strings.NewReader("GET /hello.txt HTTP/1.0\r\n\r\n")
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "HTTP/1.0 200") || !strings.HasSuffix(string(out), "\r\n\r\nhello from the box\n") {
		t.Errorf("-W: %q, %v", out, err)
	}

	// A refused -W: 255 and one line.
	closed, _ := freePort()
	cmd = shimCmd(tb, "-W", "127.0.0.1:"+closed, "main")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ = cmd.Output()
	if cmd.ProcessState.ExitCode() != 255 || len(out) != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "stdio forwarding failed") {
		t.Errorf("refused -W: exit %d, stdout %q, stderr %q", cmd.ProcessState.ExitCode(), out, stderr.String())
	}

	// The real OpenSSH client through the box to the suite's sshd, with
	// cocoonbox-ssh -W as its ProxyCommand: an SSH session end to end.
	d := startSSHD(t)
	ssh := exec.Command("ssh", "-F", d.Config, "-o", "ProxyCommand=cocoonbox-ssh -W %h:%p main", "-p", d.Port, d.User+"@127.0.0.1", "echo", "through", "the", "box")
	ssh.Env = tb.Env
	out, err = ssh.CombinedOutput()
	if err != nil || string(out) != "through the box\n" {
		t.Errorf("ssh with ProxyCommand cocoonbox-ssh -W: %q, %v", out, err)
	}
}

func TestSSHForwardNone(t *testing.T) {
	tb := startBox(t)
	httpPort := boxHTTP(t, tb)
	lp, _ := freePort()
	// -N with -v: the debug line says when the forward listens.
	cmd := shimCmd(tb, "-N", "-v", "-L", lp+":localhost:"+httpPort, "main")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "is running; waiting for a signal") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	got, err := curl(t, "http://127.0.0.1:"+lp+"/hello.txt")
	if err != nil || got != "hello from the box\n" {
		t.Errorf("curl through -N -L: %q, %v", got, err)
	}
	// SIGTERM ends -N with 0, as ssh.
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("-N after SIGTERM: exit %d, want 0", code)
	}
}

// usedPort is a port on 127.0.0.1 that the test holds until it ends.
func usedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
