//go:build unix

package cli_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sshdInetd is ssh, as a test's user runs it, against OpenSSH's sshd -i
// as its ProxyCommand (a server on the ProxyCommand's stdio, as
// cocoonbox-ssh --stdio is): what the tests compare ours with.
func sshdInetd(t *testing.T) func(args ...string) *exec.Cmd {
	t.Helper()
	d := startSSHD(t)
	cfg := filepath.Join(filepath.Dir(d.Config), "sshd_config")
	return func(args ...string) *exec.Cmd {
		return exec.Command("ssh", append([]string{"-F", d.Config, "-o", "ProxyCommand=" + sshdPath + " -i -f " + cfg,
			"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-l", d.User}, args...)...)
	}
}

// A session's replies come after those of the global requests sent
// before it, as from sshd, which answers each in turn: the reply to a
// remote forward (ssh -R) before the exec's, and so before the command's
// exit status. Before, the command ran while the box was still setting
// up the listener (here made to take a second): a second -R of the same
// port under ExitOnForwardFailure exited 0, the command's status having
// come before the forward's failure. ssh -f -R returns once the listener
// is there, with either server.
func TestSSHStdioForwardBeforeExec(t *testing.T) {
	t.Parallel()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	t.Cleanup(web.Close)
	_, webPort, _ := net.SplitHostPort(web.Listener.Addr().String())
	other, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	// The box takes a second to listen, longer than `true` takes to run.
	agent, err := exec.LookPath("cocoonbox-agent")
	if err != nil {
		t.Fatal(err)
	}
	slow := t.TempDir()
	write(t, filepath.Join(slow, "cocoonbox-agent"), "#!/bin/sh\n[ \"$1\" = listen ] && sleep 1\nexec "+agent+" \"$@\"\n")
	if err := os.Chmod(filepath.Join(slow, "cocoonbox-agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := startBoxWith(t, slow)
	s := newStdioSSH(t, b)
	ours := func(args ...string) *exec.Cmd {
		c := s.cmd(args...)
		// The host after the options: the test's own go before it.
		for i, a := range c.Args {
			if a == "HOST" {
				c.Args[i] = "main.cocoonbox"
			}
		}
		return c
	}
	theirs := sshdInetd(t)
	host := func(c *exec.Cmd) *exec.Cmd {
		for i, a := range c.Args {
			if a == "HOST" {
				c.Args[i] = "sshd-i"
			}
		}
		return c
	}
	for _, side := range []struct {
		name string
		ssh  func(args ...string) *exec.Cmd
	}{{"sshd -i", func(args ...string) *exec.Cmd { return host(theirs(args...)) }}, {"cocoonbox-ssh --stdio", ours}} {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		// Two forwards of one port in the box (ssh drops a second that is
		// the same in every part).
		listen := "127.0.0.1:" + port + ":127.0.0.1:"
		dup := side.ssh("-o", "ExitOnForwardFailure=yes", "-R", listen+webPort, "-R", listen+other, "HOST", "true")
		out, _ := dup.CombinedOutput()
		if code := dup.ProcessState.ExitCode(); code != 255 || !strings.Contains(string(out), "remote port forwarding failed for listen port "+port) {
			t.Errorf("%s: a second -R of port %s under ExitOnForwardFailure: exit %d, %q; want 255 and the failure", side.name, port, code, out)
		}

		port, err = freePort()
		if err != nil {
			t.Fatal(err)
		}
		bg := side.ssh("-f", "-o", "ExitOnForwardFailure=yes", "-R", "127.0.0.1:"+port+":127.0.0.1:"+webPort, "HOST", "sleep 20")
		// A file, not a pipe, which ssh's background half would hold open.
		log := filepath.Join(t.TempDir(), "ssh.log")
		f, err := os.Create(log)
		if err != nil {
			t.Fatal(err)
		}
		bg.Stdout, bg.Stderr = f, f
		err = bg.Run()
		f.Close()
		if err != nil {
			t.Fatalf("%s: ssh -f -R: %v\n%s", side.name, err, readFile(t, log))
		}
		// ssh -f has returned: the forward listens.
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Errorf("%s: right after ssh -f -R returned: %v", side.name, err)
			continue
		}
		fmt.Fprintf(c, "GET /via-R HTTP/1.0\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%s: through -R: %v", side.name, err)
		} else if body, _ := io.ReadAll(resp.Body); string(body) != "hello from /via-R" {
			t.Errorf("%s: through -R: %q", side.name, body)
		}
		c.Close()
	}
}

// SSH_CONNECTION and SSH_CLIENT in a box reached through cocoonbox-ssh
// --stdio read as sshd -i sets them, its peer being no socket: UNKNOWN
// addresses and port 65535. Before, they read 127.0.0.1 and port 0.
func TestSSHStdioConnectionEnv(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	theirs := sshdInetd(t)
	line := `echo "$SSH_CONNECTION|$SSH_CLIENT"`
	want := runOK(t, theirs("sshd-i", line))
	if got := runOK(t, s.cmd("main.cocoonbox", line)); got != want {
		t.Errorf("through --stdio: %q; sshd -i: %q", got, want)
	}
}
