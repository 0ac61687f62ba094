//go:build linux || darwin

package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needMosh fails the test unless mosh, mosh-client and mosh-server are
// installed (Debian's mosh, scripts/deps.sh): the box's mosh-server is
// the same package on this machine.
func needMosh(t *testing.T) {
	t.Helper()
	for _, p := range []string{"mosh", "mosh-client", "mosh-server"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%v: install mosh (scripts/deps.sh)", err)
		}
	}
}

// moshEnv is env for mosh: a UTF-8 locale, which mosh-server needs and
// mosh passes on with -l, and a terminal type.
func moshEnv(env []string) []string {
	return append(append([]string{}, env...), "LANG=C.UTF-8", "TERM=xterm")
}

// typeInMosh runs mosh with args on a PTY of the test's, types a command
// that writes a marker file in box b's workspace, waits for the file, and
// exits the shell: mosh ends with 0. mosh-client talks UDP to the
// mosh-server it started in the box through ssh.
func typeInMosh(t *testing.T, b *testBox, env []string, args ...string) {
	t.Helper()
	marker := filepath.Join(b.Workspace, "mosh.marker")
	p := startProgOnPTY(t, "mosh", env, args...)
	// Keys typed before the session is up wait in mosh-client and reach
	// the shell once it reads.
	p.write(fmt.Sprintf("echo through-mosh >%s\r", marker))
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(marker); err == nil && string(b) == "through-mosh\n" {
			break
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no marker file in the box after 60 s; the terminal shows:\n%q", p.out)
		}
		// Read what mosh draws meanwhile, so it never waits on the PTY.
		select {
		case c, ok := <-p.chunks:
			if ok {
				p.out = append(p.out, c...)
			}
		case <-p.exited:
			p.drain()
			t.Fatalf("mosh exited (%v) before the marker was written; the terminal shows:\n%q", p.cmd.ProcessState, p.out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.write("exit\r")
	p.waitFor("[mosh is exiting.]")
	<-p.exited
	p.drain()
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("mosh exited %d, want 0; the terminal shows:\n%q", code, p.out)
	}
}

// TestMoshShim: mosh --ssh=cocoonbox-ssh BOX, with nothing else: the
// shim answers mosh's fake proxy (-o ProxyCommand=mosh --fake-proxy ...)
// with the local box's UDP address, and mosh-server runs in the box.
func TestMoshShim(t *testing.T) {
	t.Parallel()
	needMosh(t)
	b := startBox(t)
	typeInMosh(t, b, moshEnv(b.Env), "--ssh=cocoonbox-ssh", "main")
}

// writeSSHConfig writes the Host block with cocoonbox ssh-config, as a
// user does, into box b's HOME, and returns the file for ssh -F (OpenSSH
// reads the passwd entry's ~/.ssh/config, not $HOME's).
func writeSSHConfig(t *testing.T, b *testBox) string {
	t.Helper()
	c := exec.Command("cocoonbox", "ssh-config")
	c.Env = b.Env
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("cocoonbox ssh-config: %v\n%s", err, out)
	}
	return filepath.Join(envValue(b.Env, "HOME"), ".ssh", "config")
}

// TestMoshOpenSSH: mosh with OpenSSH's ssh through the block cocoonbox
// ssh-config writes. mosh's default replaces the block's ProxyCommand
// with its fake proxy, which cannot resolve main.cocoonbox; with
// --experimental-remote-ip=remote it keeps ours and reads the address
// from SSH_CONNECTION in the box (docs/ssh-config.md, "mosh").
func TestMoshOpenSSH(t *testing.T) {
	t.Parallel()
	needMosh(t)
	b := startBox(t)
	cfg := writeSSHConfig(t, b)
	typeInMosh(t, b, moshEnv(b.Env), "--experimental-remote-ip=remote", "--ssh=ssh -F "+cfg, "main.cocoonbox")
}

// TestMoshRefused: where the box is reached only through the API (an
// https endpoint elsewhere), a mosh-server could not be reached over UDP:
// both ways fail with one line that says so and names the way that works,
// before anything runs in the box (the endpoint is never dialled: it does
// not exist).
func TestMoshRefused(t *testing.T) {
	t.Parallel()
	needMosh(t)
	b := startBox(t)
	cfg := writeSSHConfig(t, b)
	// No control master: one would be started for the endpoint, and stay.
	remote := []string{"COCOONBOX_ENDPOINT=https://box.example.invalid", "COCOONBOX_TOKEN=cb_" + strings.Repeat("0", 64), "COCOONBOX_CONTROL_PERSIST=0"}
	const want = "cocoonbox-ssh: mosh needs UDP to box main, which https://box.example.invalid reaches only through the cocoonbox API; use cocoonbox rsh main or cocoonbox-ssh main instead"
	for _, args := range [][]string{
		{"--ssh=cocoonbox-ssh", "main"},
		{"--experimental-remote-ip=remote", "--ssh=ssh -F " + cfg, "main.cocoonbox"},
	} {
		c := exec.Command("mosh", args...)
		c.Env = append(moshEnv(b.Env), remote...)
		out, err := c.CombinedOutput()
		if err == nil {
			t.Errorf("mosh %q: succeeded; want a failure\n%s", args, out)
		}
		lines := strings.Split(strings.ReplaceAll(string(out), "\r", ""), "\n")
		found := 0
		for _, l := range lines {
			if l == want {
				found++
			}
			if strings.Contains(l, "MOSH CONNECT") || strings.Contains(l, "mosh-server") {
				t.Errorf("mosh %q: a mosh-server ran: %q", args, l)
			}
		}
		if found != 1 {
			t.Errorf("mosh %q: want the line\n%s\nonce; got:\n%s", args, want, out)
		}
	}
}
