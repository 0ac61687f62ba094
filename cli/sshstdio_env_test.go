//go:build unix

package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/sshserve"
)

// TestSSHBashrc: Debian's bash reads ~/.bashrc for `bash -c CMD` only
// when sshd runs it (it looks for SSH_CLIENT), so `ssh host 'echo
// $FROMRC'` sees what ~/.bashrc exports: with sshd, with cocoonbox-ssh and
// with ssh through cocoonbox-ssh --stdio, Debian's bash being each one's
// shell.
func TestSSHBashrc(t *testing.T) {
	t.Parallel()
	const rc = "export FROMRC=from-bashrc\n"
	// sshd's user is this one, whose home is not the test's: sshd's SetEnv
	// points HOME at one of the test's.
	sshdHome := t.TempDir()
	write(t, filepath.Join(sshdHome, ".bashrc"), rc)
	d := startSSHD(t, "SetEnv HOME="+sshdHome)
	b := startBox(t)
	shim, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	// The box's home is made by its first command.
	runOK(t, inEnv(exec.Command(shim, "main", "true"), append(cleanEnv(t), b.Env...)))
	home := filepath.Join(filepath.Dir(b.Workspace), "home")
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	via := newStdioSSH(t, b)
	const command = `echo "$FROMRC"`
	for _, c := range []*exec.Cmd{
		inEnv(exec.Command("ssh", "-F", d.Config, "-p", d.Port, d.User+"@127.0.0.1", command), cleanEnv(t)),
		inEnv(exec.Command(shim, "main", command), append(cleanEnv(t), b.Env...)),
		inEnv(exec.Command("ssh", "-F", via.Config, "main.cocoonbox", command), append(cleanEnv(t), b.Env...)),
	} {
		if out := runOK(t, c); out != "from-bashrc\n" {
			t.Errorf("%q: %q, want what ~/.bashrc exported", c.Args, out)
		}
	}
}

// TestSSHStdioCiphers: OpenSSH's ssh gets each cipher it may ask for,
// chacha20-poly1305 (its first choice) among them.
func TestSSHStdioCiphers(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	for _, c := range strings.Split(sshserve.ClientCiphers, ",") {
		if out := runOK(t, s.cmd("-c", c, "main.cocoonbox", "echo "+c)); out != c+"\n" {
			t.Errorf("ssh -c %s: %q", c, out)
		}
	}
}

// TestSSHStdioTerminalModes: the local terminal's modes reach the box's
// terminal through ssh's pty-req, as they reach sshd's, and through
// cocoonbox-ssh -tt: erase ^H and intr ^G set with stty before ssh starts
// show in stty -a on the other side.
func TestSSHStdioTerminalModes(t *testing.T) {
	t.Parallel()
	d := startSSHD(t)
	b := startBox(t)
	s := newStdioSSH(t, b)
	const remote = `stty -a | tr ';' '\n' | grep -E '^ *(intr|erase) = ' | tr -d ' ' | tr '\n' ' '; echo END`
	for _, args := range [][]string{
		{"ssh", "-F", d.Config, "-p", d.Port, "-tt", d.User + "@127.0.0.1"},
		{"ssh", "-F", s.Config, "-tt", "main.cocoonbox"},
		{"cocoonbox-ssh", "-tt", "main"},
	} {
		env := append(append(cleanEnv(t), b.Env...), "TERM=xterm")
		// The PTY's erase is ^H already; intr is put back after, as the
		// PTY's check at the end wants it as it was.
		line := "stty intr ^G erase ^H;"
		for _, a := range args {
			line += " '" + a + "'"
		}
		p := startProgOnPTY(t, "sh", env, "-c", line+` "$0"; rc=$?; stty intr ^C; exit $rc`, remote)
		p.waitFor("intr=^G erase=^H END")
		p.wantExit(0)
	}
}

// ssh -tt with no terminal here asks for a 0×0 terminal, and sshd leaves
// it so (`stty size` says "0 0"); through --stdio and cocoonbox-ssh the
// box's terminal is the same, not a made-up 24×80.
func TestSSHZeroSizeTerminal(t *testing.T) {
	d := startSSHD(t)
	b := startBox(t)
	s := newStdioSSH(t, b)
	for _, args := range [][]string{
		{"ssh", "-F", d.Config, "-p", d.Port, "-tt", d.User + "@127.0.0.1", "stty size"},
		{"ssh", "-F", s.Config, "-tt", "main.cocoonbox", "stty size"},
		{"cocoonbox-ssh", "-tt", "main", "stty size"},
	} {
		c := exec.Command(args[0], args[1:]...)
		c.Env = append(append(cleanEnv(t), b.Env...), "TERM=xterm")
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if got := strings.TrimSpace(string(out)); got != "0 0" {
			t.Errorf("%q: stty size %q, want \"0 0\" as sshd", args, got)
		}
	}
}
