//go:build unix

package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// paramikoSnippet is the Paramiko example of docs/ssh-config.md, as a
// user would paste it: the first indented block of "Paramiko and Fabric".
func paramikoSnippet(t *testing.T) string {
	t.Helper()
	doc := readFile(t, filepath.Join("..", "docs", "ssh-config.md"))
	_, sec, ok := strings.Cut(doc, "\n## Paramiko and Fabric\n")
	if !ok {
		t.Fatal(`docs/ssh-config.md has no "## Paramiko and Fabric"`)
	}
	var code []string
	for l := range strings.Lines(sec) {
		switch {
		case strings.HasPrefix(l, "    "):
			code = append(code, strings.TrimPrefix(l, "    "))
		case strings.TrimSpace(l) == "" && len(code) > 0:
			code = append(code, "\n")
		case len(code) > 0:
			return strings.Join(code, "")
		}
	}
	t.Fatal("no code block under Paramiko and Fabric")
	return ""
}

// TestSSHStdioParamikoClient: Paramiko's usual SSHClient.connect through
// the ProxyCommand, with the snippet of docs/ssh-config.md: no key in
// ~/.ssh and no agent (Paramiko never tries "none", so the snippet gives
// an empty password), a key in ~/.ssh (tried first, before anything
// else), a password, and our pin
// added under the host name with RejectPolicy. Without the pin the same
// code is refused, so the pin is what lets it in.
func TestSSHStdioParamikoClient(t *testing.T) {
	t.Parallel()
	python := paramikoPython(t)
	b := startBox(t)
	s := newStdioSSH(t, b)
	home := envValue(s.Env, "HOME")
	// The pin the snippet reads: ssh-config writes it.
	runOK(t, inEnv(exec.Command("cocoonbox", "ssh-config", "--print"), s.Env))
	snippet := paramikoSnippet(t)
	const connect = `client.connect(host, username="user", password="",`
	if !strings.Contains(snippet, connect) {
		t.Fatalf("the snippet has no %q:\n%s", connect, snippet)
	}
	uname := strings.TrimSpace(runOK(t, inEnv(exec.Command("ssh", "-F", s.Config, "main.cocoonbox", "uname -a"), s.Env)))
	if out := runOK(t, inEnv(exec.Command(python, "-c", snippet), s.Env)); strings.TrimSpace(out) != uname {
		t.Errorf("paramiko with no key and no agent printed %q, want %q", out, uname)
	}
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(home, ".ssh", "id_ed25519")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	for name, code := range map[string]string{
		"a key in ~/.ssh": snippet,
		"a password":      strings.Replace(snippet, connect, `client.connect(host, username="user", password="anything", look_for_keys=False, allow_agent=False,`, 1),
	} {
		out := runOK(t, inEnv(exec.Command(python, "-c", code), s.Env))
		if strings.TrimSpace(out) != uname {
			t.Errorf("paramiko with %s printed %q, want %q", name, out, uname)
		}
	}
	unpinned := strings.Replace(snippet, "client.get_host_keys().add(", "0 and client.get_host_keys().add(", 1)
	c := inEnv(exec.Command(python, "-c", unpinned), s.Env)
	out, err := c.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not found in known_hosts") {
		t.Errorf("paramiko without the pin: %v\n%s\nwant it refused", err, out)
	}
}

// TestSSHStdioNewToken: a ControlMaster's ProxyCommand outlives its
// token: the device is revoked, a new token saved (as cocoonbox login or
// localbox start do), and the next session through the same master uses
// the new one.
func TestSSHStdioNewToken(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	var env []string
	for _, kv := range s.Env {
		if !strings.HasPrefix(kv, "COCOONBOX_TOKEN=") {
			env = append(env, kv)
		}
	}
	s.Env = env
	login := func(tok string) {
		t.Helper()
		c := inEnv(exec.Command("cocoonbox", "login", "--token", "-"), env)
		c.Stdin = strings.NewReader(tok + "\n")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("login: %v\n%s", err, out)
		}
	}
	login(b.Token)
	starts := s.startMaster(t)
	if out := runOK(t, s.cmd("main.cocoonbox", "echo one")); out != "one\n" {
		t.Fatalf("ssh through the master: %q", out)
	}

	var dev struct{ ID string }
	if err := json.Unmarshal([]byte(runOK(t, inEnv(exec.Command("cocoonbox", "devices", "--json"), env))), &dev); err != nil || dev.ID == "" {
		t.Fatalf("devices --json: %v %+v", err, dev)
	}
	runOK(t, inEnv(exec.Command("cocoonbox", "devices", "revoke", dev.ID), env))
	// The old token is refused now: the master's next session fails.
	c := s.cmd("main.cocoonbox", "echo two")
	if out, err := c.CombinedOutput(); err == nil {
		t.Fatalf("ssh after the revoke: %q; want it refused", out)
	}
	tok, err := localbox.IssueToken(b.srv.Dir, "again", "cli")
	if err != nil {
		t.Fatal(err)
	}
	login(tok)
	if out := runOK(t, s.cmd("main.cocoonbox", "echo x")); out != "x\n" {
		t.Errorf("ssh through the master after a new token: %q, want x", out)
	}
	if n := strings.Count(readFile(t, starts), "start"); n != 1 {
		t.Errorf("the ProxyCommand started %d times, want once for the master", n)
	}
}
