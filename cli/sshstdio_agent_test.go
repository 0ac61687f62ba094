//go:build unix

package cli_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// agentWithKey starts a real ssh-agent on a socket of the test's, adds
// the private key file key to it, and stops it when the test ends. It
// returns the socket, for SSH_AUTH_SOCK.
func agentWithKey(t *testing.T, key string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	a := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := a.Start(); err != nil {
		t.Fatalf("ssh-agent: %v (scripts/deps.sh installs openssh-client)", err)
	}
	t.Cleanup(func() {
		a.Process.Kill()
		a.Wait()
	})
	// ssh-agent binds its socket before it listens: wait for a connect,
	// not for the file.
	deadline := time.Now().Add(time.Minute)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ssh-agent took no connection in a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	runOK(t, inEnv(exec.Command("ssh-add", "-q", key), []string{"SSH_AUTH_SOCK=" + sock, "PATH=" + os.Getenv("PATH")}))
	return sock
}

// github is an sshd standing in for GitHub: a bare repository there,
// which only the key of its ssh_config may push to.
type github struct {
	// URL is the repository's ssh URL, Repo its directory.
	URL, Repo string
	// Known is the known_hosts line that pins the sshd's host key.
	Known string
	// Key is the private key file it accepts.
	Key string
}

func githubStandIn(t *testing.T) *github {
	t.Helper()
	d := startSSHD(t)
	dir := filepath.Dir(d.Config)
	repo := filepath.Join(t.TempDir(), "project.git")
	runOK(t, exec.Command("git", "init", "-q", "--bare", "-b", "main", repo))
	return &github{
		URL:   "ssh://" + d.User + "@127.0.0.1:" + d.Port + repo,
		Repo:  repo,
		Known: readFile(t, filepath.Join(dir, "known_hosts")),
		Key:   filepath.Join(dir, "user"),
	}
}

// pushScript is what the box runs to push a commit to gh through the
// agent of SSH_AUTH_SOCK, after printing the socket's and its directory's
// mode, owner and type, the box user, and the fingerprints the agent
// lists. The box's workspace holds gh's known_hosts.
func pushScript(gh *github) string {
	return `set -e
stat -c '%a %U %F' "$SSH_AUTH_SOCK" "$(dirname "$SSH_AUTH_SOCK")"
id -un
echo "$SSH_AUTH_SOCK" > agent-path
ssh-add -l | cut -d' ' -f2
export GIT_SSH_COMMAND="ssh -o UserKnownHostsFile=$PWD/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes"
rm -rf work
git init -q -b main work
cd work
git -c user.name=box -c user.email=box@example.com commit -q --allow-empty -m 'from the box'
git push -q ` + gh.URL + ` main
`
}

// checkPush checks what pushScript printed (out) against the local agent
// at sock, and that gh got the commit; then that the agent socket's
// directory is gone (the session has ended).
func checkPush(t *testing.T, out, sock string, gh *github, workspace string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("the box printed %q", out)
	}
	user := lines[2]
	if want := "600 " + user + " socket"; lines[0] != want {
		t.Errorf("agent socket: %q, want %q", lines[0], want)
	}
	if want := "700 " + user + " directory"; lines[1] != want {
		t.Errorf("agent socket's directory: %q, want %q", lines[1], want)
	}
	fp := runOK(t, inEnv(exec.Command("ssh-add", "-l"), []string{"SSH_AUTH_SOCK=" + sock, "PATH=" + os.Getenv("PATH")}))
	if f := strings.Fields(fp); len(f) < 2 || lines[3] != f[1] {
		t.Errorf("ssh-add -l in the box: %q; here: %q", lines[3], fp)
	}
	if got := runOK(t, exec.Command("git", "--git-dir", gh.Repo, "log", "--format=%s", "main")); got != "from the box\n" {
		t.Errorf("the stand-in's repository has %q", got)
	}
	path := strings.TrimSpace(readFile(t, filepath.Join(workspace, "agent-path")))
	waitFor(t, nil, func() bool { _, err := os.Lstat(filepath.Dir(path)); return os.IsNotExist(err) })
	// The next push is another commit on a new repository: start afresh.
	runOK(t, exec.Command("git", "--git-dir", gh.Repo, "update-ref", "-d", "refs/heads/main"))
}

// boxKnownHosts writes gh's known_hosts line into the box's workspace,
// where the box user's ssh reads it.
func boxKnownHosts(t *testing.T, gh *github, workspace string) {
	t.Helper()
	write(t, filepath.Join(workspace, "known_hosts"), gh.Known)
	os.Chmod(filepath.Join(workspace, "known_hosts"), 0o644)
}

// TestSSHStdioAgentConnection: as with sshd, run side by side, the agent
// socket ssh -A asks for is the connection's: through a ControlMaster, a
// later session (without -A) gets the same SSH_AUTH_SOCK, which still
// reaches the agent after the session that asked has ended (a tmux
// started under -A keeps its agent), and the socket is gone once the
// connection ends.
func TestSSHStdioAgentConnection(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "key")
	runOK(t, exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key))
	agent := agentWithKey(t, key)
	b := startBox(t)
	s := newStdioSSH(t, b)
	d := startSSHD(t)
	for _, c := range []struct {
		name string
		cmd  func(args ...string) *exec.Cmd
	}{
		{"sshd", func(args ...string) *exec.Cmd {
			return exec.Command("ssh", append([]string{"-F", d.Config, "-p", d.Port, "-l", d.User}, args...)...)
		}},
		{"ssh --stdio", s.cmd},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := "127.0.0.1"
			if c.name != "sshd" {
				host = "main.cocoonbox"
			}
			mux := []string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + filepath.Join(t.TempDir(), "cm"), "-o", "ControlPersist=yes", "-o", "IdentityAgent=" + agent}
			// ssh's master passes on a session's -A only when it has
			// ForwardAgent itself.
			runOK(t, c.cmd(append(mux, "-A", "-fN", host)...))
			defer c.cmd(append(mux, "-O", "exit", host)...).Run()
			sock := strings.TrimSpace(runOK(t, c.cmd(append(mux, "-A", host, "echo $SSH_AUTH_SOCK")...)))
			if sock == "" {
				t.Fatal("ssh -A: no SSH_AUTH_SOCK")
			}
			if got := runOK(t, c.cmd(append(mux, host, `echo "$SSH_AUTH_SOCK"; ssh-add -l >/dev/null && echo reaches the agent`)...)); got != sock+"\nreaches the agent\n" {
				t.Errorf("a later session without -A: %q; want %s, which reaches the agent", got, sock)
			}
			runOK(t, c.cmd(append(mux, "-O", "exit", host)...))
			waitFor(t, nil, func() bool { _, err := os.Lstat(sock); return os.IsNotExist(err) })
		})
	}
}
