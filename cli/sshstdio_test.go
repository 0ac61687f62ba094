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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/cocoonbox/cocoonbox/sshserve"
)

// frameRE picks out of ssh -vvv's log the frames that end a session
// channel: its exit status or signal, its EOF and its close.
var frameRE = regexp.MustCompile(`(?m)^debug[0-9]: (?:client_input_channel_req: channel 0 rtype (exit-status|exit-signal)|channel 0: rcvd (eof|close))`)

// TestSSHStdioExitCodes: through OpenSSH's ssh and cocoonbox-ssh --stdio,
// the remote exit code reaches ssh's exit status, a command killed by a
// signal ends in 255, and the frames come in the order every client can
// read: exit-status (or exit-signal), then EOF, then close
// (tailscale's tailssh_frameorder_test.go checks the same).
func TestSSHStdioExitCodes(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	tests := []struct {
		command string
		code    int
		frames  []string
		stderr  string
	}{
		{command: "true", code: 0, frames: []string{"exit-status", "eof", "close"}},
		{command: "exit 1", code: 1, frames: []string{"exit-status", "eof", "close"}},
		{command: "echo out; exit 42", code: 42, frames: []string{"exit-status", "eof", "close"}},
		{command: "no-such-command-here", code: 127, frames: []string{"exit-status", "eof", "close"}},
		{command: "exit 255", code: 255, frames: []string{"exit-status", "eof", "close"}},
		{command: "kill -TERM $$", code: 255, frames: []string{"exit-signal", "eof", "close"}},
		{command: "seq 1 100000 >&2; kill -KILL $$", code: 255, frames: []string{"exit-signal", "eof", "close"}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			// ssh's log apart from the remote stderr, which may hold anything.
			logFile := filepath.Join(t.TempDir(), "ssh.log")
			c := s.cmd("-vvv", "-E", logFile, "main.cocoonbox", tt.command)
			err := c.Run()
			if _, ok := err.(*exec.ExitError); err != nil && !ok {
				t.Fatal(err)
			}
			log := readFile(t, logFile)
			if got := c.ProcessState.ExitCode(); got != tt.code {
				t.Errorf("exit status %d, want %d; ssh -vvv says:\n%s", got, tt.code, log)
			}
			var frames []string
			for _, m := range frameRE.FindAllStringSubmatch(log, -1) {
				frames = append(frames, m[1]+m[2])
			}
			if diff := cmp.Diff(tt.frames, frames); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSSHStdioErrors: what goes wrong on our side is one line on the
// session's stderr and ssh's exit status 255.
func TestSSHStdioErrors(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)

	c := s.cmd("nobox.cocoonbox", "true")
	out, err := c.CombinedOutput()
	if c.ProcessState.ExitCode() != 255 || !strings.Contains(string(out), `cocoonbox-ssh: `) || !strings.Contains(string(out), `"nobox"`) {
		t.Errorf("a box that does not exist: %v, output %q; want 255 and one line naming it", err, out)
	}

	c = s.cmd("-s", "main.cocoonbox", "no-such-subsystem")
	out, _ = c.CombinedOutput()
	if c.ProcessState.ExitCode() != 255 || !strings.Contains(string(out), "subsystem request failed") {
		t.Errorf("an unknown subsystem: exit %d, output %q; want 255 and ssh's refusal", c.ProcessState.ExitCode(), out)
	}

	// -h: the usage on stdout, 0.
	c = exec.Command(s.Shim, "--stdio", "-h")
	if out, err := c.Output(); err != nil || !strings.HasPrefix(string(out), "usage: cocoonbox-ssh --stdio") {
		t.Errorf("--stdio -h: %v, stdout %q; want the usage and 0", err, out)
	}

	// A bad command line of --stdio itself: one line, the usage, 255.
	shim, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--stdio"}, {"--stdio", "a", "b"}, {"--stdio", ".cocoonbox"}, {"--stdio", "--suffix", "box", "main.box"}, {"--stdio", "--bogus", "main"}} {
		c := exec.Command(shim, args...)
		c.Env = s.Env
		var stdout, stderr strings.Builder
		c.Stdout, c.Stderr = &stdout, &stderr
		c.Run()
		first, _, _ := strings.Cut(stderr.String(), "\n")
		if c.ProcessState.ExitCode() != 255 || stdout.Len() != 0 || !strings.HasPrefix(first, "cocoonbox-ssh: ") || !strings.Contains(stderr.String(), "usage: cocoonbox-ssh --stdio") {
			t.Errorf("cocoonbox-ssh %q: exit %d, stdout %q, stderr %q; want 255, one line and the usage on stderr", args, c.ProcessState.ExitCode(), stdout.String(), stderr.String())
		}
	}
}

// TestSSHStdioHostKey: the host key is made once, 0600, and pinned:
// ssh with StrictHostKeyChecking refuses a server whose key is not the
// pinned one, and accepts ours without a word.
func TestSSHStdioHostKey(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	c := s.cmd("main.cocoonbox", "echo ok")
	out, err := c.CombinedOutput()
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("pinned key: %v, output %q; want ok and nothing else", err, out)
	}
	state := filepath.Join(envValue(b.Env, "HOME"), ".local", "state", "cocoonbox")
	fi, err := os.Stat(filepath.Join(state, sshserve.HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("host key mode %04o, want 0600", fi.Mode().Perm())
	}
	// Another key pinned: ssh must refuse.
	other, err := sshserve.HostKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(s.Dir, "known_hosts"), sshserve.KnownHostsLine("*.cocoonbox", other.PublicKey())+"\n")
	c = s.cmd("main.cocoonbox", "echo ok")
	out, _ = c.CombinedOutput()
	if c.ProcessState.ExitCode() != 255 || !strings.Contains(string(out), "REMOTE HOST IDENTIFICATION HAS CHANGED") {
		t.Errorf("wrong key pinned: exit %d, output %q; want ssh's refusal", c.ProcessState.ExitCode(), out)
	}
}

// TestSSHStdioTerminal: OpenSSH's ssh on a PTY the test made, through
// cocoonbox-ssh --stdio: the box gets a terminal of the PTY's size, TERM
// and the local terminfo, a resize, raw bytes; the exit code comes back and
// ssh gives the terminal back as it found it.
func TestSSHStdioTerminal(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	env := append(append([]string{}, s.Env...), "TERM=xterm-256color")
	p := startProgOnPTY(t, "ssh", env, "-F", s.Config, "-t", "main.cocoonbox",
		`stty size; echo "TERM=$TERM"; test -s ~/.terminfo/x/xterm-256color && echo TERMINFO-OK; tty >/dev/null && echo TTY-OK; `+
			`trap 'stty size; stty raw -echo; echo READY2; head -c 3 | od -An -tx1; stty sane; exit 7' WINCH; echo READY; while :; do sleep 0.1; done`)
	p.waitFor("24 80\r\n")
	p.waitFor("TERM=xterm-256color\r\n")
	p.waitFor("TERMINFO-OK\r\n")
	p.waitFor("TTY-OK\r\n")
	p.waitFor("READY")
	p.resize(40, 100)
	p.waitFor("40 100\r\n")
	p.waitFor("READY2")
	// Ctrl-C, NUL, Ctrl-D: bytes for the box, not signals or EOF here.
	p.write("\x03\x00\x04")
	p.waitFor(" 03 00 04")
	p.wantExit(7)
	p.waitFor("Connection to main.cocoonbox closed.")
}

// TestSSHStdioTerminalEscape: OpenSSH's own ~. ends the session; with
// COCOONBOX_RESUME=off the command in the box is ended with it (unset, a
// terminal's shell is kept for rsh --attach: --stdio cannot tell ~. from
// a lost connection), ssh exits 255.
func TestSSHStdioTerminalEscape(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	env := append(append([]string{}, s.Env...), "TERM=xterm", "COCOONBOX_RESUME=off")
	p := startProgOnPTY(t, "ssh", env, "-F", s.Config, "-t", "main.cocoonbox", `echo $$ >esc.pid; echo READY; sed -u 's/^/got:/'`)
	p.waitFor("READY")
	p.write("abc\r")
	p.waitFor("got:abc")
	p.write("\r~.")
	p.wantExit(255)
	waitGone(t, filepath.Join(b.Workspace, "esc.pid"))
}

// waitGone waits until the process whose pid is in file has ended: the
// box ends a command once its connection has gone. It fails the test if
// that takes more than half a minute.
func waitGone(t *testing.T, file string) {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, file)))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; syscall.Kill(pid, 0) == nil; i++ {
		if i == 3000 {
			t.Fatalf("the command in the box (pid %d) outlived the connection", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSSHStdioClientKilled: when ssh dies (SIGKILL: no goodbye), the
// server sees its stdin end, and the command in the box ends with it.
func TestSSHStdioClientKilled(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	c := s.cmd("main.cocoonbox", "echo $$ >killed.pid; echo READY; sleep 600")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(out).ReadString('\n'); l != "READY\n" {
		t.Fatalf("read %q, %v", l, err)
	}
	c.Process.Kill()
	c.Wait()
	waitGone(t, filepath.Join(b.Workspace, "killed.pid"))
}

// runOK runs c and fails the test unless it succeeds; it returns stdout.
func runOK(t *testing.T, c *exec.Cmd) string {
	t.Helper()
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("%q: %v\nstdout:\n%s\nstderr:\n%s", c.Args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// inEnv is c with env as its environment.
func inEnv(c *exec.Cmd, env []string) *exec.Cmd {
	c.Env = env
	return c
}

// TestSSHStdioTools: OpenSSH's scp (SFTP and -O), sftp in batch mode,
// rsync -e ssh, and git clone and push, all through main.cocoonbox as a
// user's ssh_config makes them, byte for byte.
func TestSSHStdioTools(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"scp", "sftp", "rsync", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%v: scripts/deps.sh installs it", err)
		}
	}
	b := startBox(t)
	s := newStdioSSH(t, b)
	local := t.TempDir()
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	src := filepath.Join(local, "a file")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	same := func(what, path string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if string(got) != string(data) {
			t.Errorf("%s: %d bytes differ from the %d sent", what, len(got), len(data))
		}
	}

	t.Run("scp", func(t *testing.T) {
		runOK(t, inEnv(exec.Command("scp", "-q", "-F", s.Config, src, "main.cocoonbox:via-sftp"), s.Env))
		same("scp (SFTP) up", filepath.Join(b.Workspace, "via-sftp"))
		runOK(t, inEnv(exec.Command("scp", "-q", "-O", "-F", s.Config, "main.cocoonbox:via-sftp", filepath.Join(local, "down-O")), s.Env))
		same("scp -O down", filepath.Join(local, "down-O"))
		runOK(t, inEnv(exec.Command("scp", "-q", "-O", "-F", s.Config, src, "main.cocoonbox:via-O"), s.Env))
		same("scp -O up", filepath.Join(b.Workspace, "via-O"))
		runOK(t, inEnv(exec.Command("scp", "-q", "-F", s.Config, "main.cocoonbox:via-O", filepath.Join(local, "down-sftp")), s.Env))
		same("scp (SFTP) down", filepath.Join(local, "down-sftp"))
	})

	t.Run("sftp", func(t *testing.T) {
		batch := filepath.Join(local, "batch")
		write(t, batch, fmt.Sprintf("mkdir sdir\nput %q sdir/put\nls sdir\nget sdir/put %q\nrename sdir/put sdir/moved\nls -1 sdir\n", src, filepath.Join(local, "got")))
		out := runOK(t, inEnv(exec.Command("sftp", "-F", s.Config, "-b", batch, "main.cocoonbox"), s.Env))
		if !strings.Contains(out, "sftp> ls -1 sdir\nsdir/moved\n") {
			t.Errorf("sftp batch output:\n%s", out)
		}
		same("sftp put", filepath.Join(b.Workspace, "sdir", "moved"))
		same("sftp get", filepath.Join(local, "got"))
	})

	t.Run("rsync", func(t *testing.T) {
		tree := filepath.Join(local, "tree")
		for _, f := range []string{"x/1", "x/2 two", "y/ü/3"} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(tree, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(tree, f), f+"\n")
		}
		if err := os.WriteFile(filepath.Join(tree, "big"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		rsh := "ssh -F " + s.Config
		runOK(t, inEnv(exec.Command("rsync", "-a", "-e", rsh, tree+"/", "main.cocoonbox:tree/"), s.Env))
		same("rsync up", filepath.Join(b.Workspace, "tree", "big"))
		if got := readFile(t, filepath.Join(b.Workspace, "tree", "y", "ü", "3")); got != "y/ü/3\n" {
			t.Errorf("rsync up: y/ü/3 holds %q", got)
		}
		back := filepath.Join(local, "back")
		runOK(t, inEnv(exec.Command("rsync", "-a", "-e", rsh, "main.cocoonbox:tree/", back+"/"), s.Env))
		same("rsync down", filepath.Join(back, "big"))
		// A no-op re-run sends no file.
		out := runOK(t, inEnv(exec.Command("rsync", "-ai", "-e", rsh, tree+"/", "main.cocoonbox:tree/"), s.Env))
		if out != "" {
			t.Errorf("rsync re-run itemized changes:\n%s", out)
		}
	})

	t.Run("git", func(t *testing.T) {
		env := append(append([]string{}, s.Env...), "GIT_SSH_COMMAND=ssh -F "+s.Config,
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		runOK(t, inEnv(s.cmd("main.cocoonbox", "git init -q --bare -b main repo.git"), env))
		repo := filepath.Join(local, "repo")
		runOK(t, inEnv(exec.Command("git", "init", "-q", "-b", "main", repo), env))
		write(t, filepath.Join(repo, "f"), "one\n")
		runOK(t, inEnv(exec.Command("git", "-C", repo, "add", "f"), env))
		runOK(t, inEnv(exec.Command("git", "-C", repo, "commit", "-q", "-m", "first"), env))
		runOK(t, inEnv(exec.Command("git", "-C", repo, "push", "-q", "main.cocoonbox:repo.git", "main"), env))
		clone := filepath.Join(local, "clone")
		runOK(t, inEnv(exec.Command("git", "clone", "-q", "main.cocoonbox:repo.git", clone), env))
		write(t, filepath.Join(clone, "f"), "two\n")
		runOK(t, inEnv(exec.Command("git", "-C", clone, "commit", "-q", "-am", "second"), env))
		runOK(t, inEnv(exec.Command("git", "-C", clone, "push", "-q"), env))
		runOK(t, inEnv(exec.Command("git", "-C", repo, "pull", "-q", "main.cocoonbox:repo.git", "main"), env))
		if got := readFile(t, filepath.Join(repo, "f")); got != "two\n" {
			t.Errorf("after clone, push and pull: f holds %q", got)
		}
		if out := runOK(t, inEnv(exec.Command("git", "-C", filepath.Join(b.Workspace, "repo.git"), "log", "--format=%s", "main"), env)); out != "second\nfirst\n" {
			t.Errorf("the box's repository has %q", out)
		}
	})
}

// TestSSHStdioControlMaster: with ControlMaster, one connection (one
// ProxyCommand) carries three sessions that run at the same time.
func TestSSHStdioControlMaster(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	starts := s.startMaster(t)
	runOK(t, s.cmd("-O", "check", "main.cocoonbox"))

	// Each waits until all three have started: they only finish if the
	// master runs them side by side.
	errs := make(chan error, 3)
	outs := make(chan string, 3)
	for i := range 3 {
		go func() {
			c := s.cmd("main.cocoonbox", fmt.Sprintf(`touch cm-%d; n=0; while [ "$(ls cm-* | wc -l)" -lt 3 ]; do sleep 0.05; n=$((n+1)); [ $n -lt 400 ] || exit 9; done; cat; echo " session %d" >&2; exit %d`, i, i, 40+i))
			c.Stdin = strings.NewReader(fmt.Sprintf("stdin %d", i))
			var stdout, stderr strings.Builder
			c.Stdout, c.Stderr = &stdout, &stderr
			c.Run()
			if code := c.ProcessState.ExitCode(); code != 40+i {
				errs <- fmt.Errorf("session %d: exit %d, want %d; stderr %q", i, code, 40+i, stderr.String())
				return
			}
			outs <- stdout.String() + stderr.String()
			errs <- nil
		}()
	}
	var got []string
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(outs)
	for o := range outs {
		got = append(got, o)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"stdin 0 session 0\n", "stdin 1 session 1\n", "stdin 2 session 2\n"}, got); diff != "" {
		t.Errorf("sessions' output (-want +got):\n%s", diff)
	}
	if n := strings.Count(readFile(t, starts), "start"); n != 1 {
		t.Errorf("the ProxyCommand started %d times, want once for the master", n)
	}
}

// startMaster turns ControlMaster on in s's config, with a ProxyCommand
// that counts its starts in the file it returns, and starts the master.
func (s *stdioSSH) startMaster(t *testing.T) (starts string) {
	t.Helper()
	dir := t.TempDir()
	starts = filepath.Join(dir, "starts")
	cfg := readFile(t, s.Config)
	cfg = strings.Replace(cfg, fmt.Sprintf("  ProxyCommand %q --stdio %%h", s.Shim),
		fmt.Sprintf("  ProxyCommand sh -c 'echo start >>%s; exec %s --stdio %%h'", starts, s.Shim), 1)
	cfg = strings.Replace(cfg, "  ControlMaster no\n", fmt.Sprintf("  ControlMaster auto\n  ControlPath %s/cm-%%C\n  ControlPersist yes\n", dir), 1)
	write(t, s.Config, cfg)
	runOK(t, s.cmd("-fN", "main.cocoonbox"))
	t.Cleanup(func() { s.cmd("-O", "exit", "main.cocoonbox").Run() })
	return starts
}

// paramikoScript drives Paramiko over cocoonbox-ssh --stdio as its
// ProxyCommand: the host key checked against known_hosts, auth none, two
// sessions on one connection (stdin, EOF, stderr apart, exit codes), and
// an SFTP round trip.
const paramikoScript = `
import io, sys, paramiko
shim, known = sys.argv[1], sys.argv[2]
t = paramiko.Transport(paramiko.ProxyCommand("'%s' --stdio main.cocoonbox" % shim))
t.start_client()
if not paramiko.HostKeys(known).check("main.cocoonbox", t.get_remote_server_key()):
    sys.exit("host key not the pinned one")
t.auth_none("user")
for i in range(2):
    ch = t.open_session()
    ch.exec_command("cat; echo err %d >&2; exit %d" % (i, 40 + i))
    ch.sendall(b"in %d\n" % i)
    ch.shutdown_write()
    out = ch.makefile("rb").read()
    err = ch.makefile_stderr("rb").read()
    print(out, err, ch.recv_exit_status())
sftp = paramiko.SFTPClient.from_transport(t)
sftp.putfo(io.BytesIO(b"x" * 300000), "paramiko.bin")
b = io.BytesIO()
sftp.getfo("paramiko.bin", b)
print(len(b.getvalue()), sftp.stat("paramiko.bin").st_size)
t.close()
`

// paramikoPython is Debian's python3, with python3-paramiko.
func paramikoPython(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import paramiko").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s: install python3-paramiko (scripts/deps.sh)", err, out)
	}
	return python
}

// TestSSHStdioParamiko: Paramiko (Debian's python3-paramiko) through the
// ProxyCommand, as Fabric and Ansible's paramiko connection use it.
func TestSSHStdioParamiko(t *testing.T) {
	t.Parallel()
	python := paramikoPython(t)
	b := startBox(t)
	s := newStdioSSH(t, b)
	known := filepath.Join(s.Dir, "paramiko_known_hosts")
	// Paramiko matches no wildcards: the host itself is pinned.
	write(t, known, sshserve.KnownHostsLine("main.cocoonbox", s.Key)+"\n")
	out := runOK(t, inEnv(exec.Command(python, "-c", paramikoScript, s.Shim, known), s.Env))
	want := "b'in 0\\n' b'err 0\\n' 40\nb'in 1\\n' b'err 1\\n' 41\n300000 300000\n"
	if out != want {
		t.Errorf("paramiko printed:\n%s\nwant:\n%s", out, want)
	}
}

// waitListening waits until something accepts on 127.0.0.1:port, or
// the process that should listen there has exited.
func waitListening(t *testing.T, port string, exited <-chan struct{}, stderr *strings.Builder) {
	t.Helper()
	for {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("ssh exited before it listened on %s; stderr:\n%s", port, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestSSHStdioForwarding: ssh's -L, -D, -W and ProxyJump through
// direct-tcpip channels reach what listens inside the box (the local box
// shares this machine's loopback, so an HTTP server of the test's on
// 127.0.0.1 stands for one started in the box).
func TestSSHStdioForwarding(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	t.Cleanup(web.Close)
	_, webPort, _ := net.SplitHostPort(web.Listener.Addr().String())

	// background runs ssh -N with args until the test ends, once it
	// listens on port.
	background := func(t *testing.T, port string, args ...string) {
		t.Helper()
		startForward(t, s.cmd(append([]string{"-N", "-o", "ExitOnForwardFailure=yes"}, args...)...), port)
	}
	curl := func(t *testing.T, args ...string) string {
		t.Helper()
		return runOK(t, exec.Command("curl", append([]string{"-sS", "--noproxy", "*"}, args...)...))
	}

	t.Run("-L", func(t *testing.T) {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		background(t, port, "-L", port+":localhost:"+webPort, "main.cocoonbox")
		if got := curl(t, "http://127.0.0.1:"+port+"/via-L"); got != "hello from /via-L" {
			t.Errorf("curl through -L: %q", got)
		}
	})
	t.Run("-D", func(t *testing.T) {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		background(t, port, "-D", "127.0.0.1:"+port, "main.cocoonbox")
		if got := curl(t, "--socks5-hostname", "127.0.0.1:"+port, "http://localhost:"+webPort+"/via-D"); got != "hello from /via-D" {
			t.Errorf("curl through -D: %q", got)
		}
	})
	t.Run("-W", func(t *testing.T) {
		c := s.cmd("-W", "127.0.0.1:"+webPort, "main.cocoonbox")
		c.Stdin = strings.NewReader("GET /via-W HTTP/1.0\r\nHost: x\r\n\r\n")
		if got := runOK(t, c); !strings.HasSuffix(got, "\r\n\r\nhello from /via-W") {
			t.Errorf("HTTP through -W: %q", got)
		}
	})
	t.Run("-W refused", func(t *testing.T) {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		c := s.cmd("-W", "127.0.0.1:"+port, "main.cocoonbox")
		out, _ := c.CombinedOutput()
		// The reason names the target and the box once.
		if c.ProcessState.ExitCode() != 255 || strings.Count(string(out), "connect to 127.0.0.1:"+port+" in box main") != 1 ||
			strings.Count(string(out), "main") != 1 || !strings.Contains(string(out), "refused") {
			t.Errorf("-W to a closed port: exit %d, %q; want 255 and why, said once", c.ProcessState.ExitCode(), out)
		}
	})
	t.Run("ProxyJump", func(t *testing.T) {
		d := startSSHD(t)
		// The box block first: ssh_config's first value wins.
		cfg := filepath.Join(t.TempDir(), "ssh_config")
		write(t, cfg, readFile(t, s.Config)+readFile(t, d.Config))
		c := exec.Command("ssh", "-F", cfg, "-J", "main.cocoonbox", "-p", d.Port, d.User+"@127.0.0.1", "echo jumped")
		c.Env = s.Env
		if got := runOK(t, c); got != "jumped\n" {
			t.Errorf("ssh -J main.cocoonbox: %q", got)
		}
	})
}

// goClient is x/crypto/ssh's client (as Go tools use it) over a
// cocoonbox-ssh --stdio process's stdin and stdout, the host key checked
// against the pinned one.
func goClient(t *testing.T, b *testBox) *ssh.Client {
	t.Helper()
	s := newStdioSSH(t, b)
	c1, c2 := net.Pipe()
	cmd := exec.Command(s.Shim, "--stdio", "main.cocoonbox")
	cmd.Env = s.Env
	cmd.Stdin, cmd.Stdout = c2, c2
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c1.Close()
		cmd.Wait()
		if t.Failed() {
			t.Logf("cocoonbox-ssh --stdio stderr:\n%s", stderr.String())
		}
	})
	conn, chans, reqs, err := ssh.NewClientConn(c1, "main.cocoonbox", &ssh.ClientConfig{
		User:            "user",
		HostKeyCallback: ssh.FixedHostKey(s.Key),
	})
	if err != nil {
		t.Fatal(err)
	}
	return ssh.NewClient(conn, chans, reqs)
}

// TestSSHStdioGoClient: what OpenSSH's client never sends, through Go's
// SSH client: a signal request reaches the command, keepalive and unknown
// global requests get a reply, tcpip-forward listens in the box and its
// cancel ends that, unknown channel types are refused, and
// no-more-sessions is honoured.
func TestSSHStdioGoClient(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	c := goClient(t, b)

	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start(`trap 'echo got TERM; exit 3' TERM; echo ready; while :; do sleep 0.1; done`); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if l, err := r.ReadString('\n'); l != "ready\n" {
		t.Fatalf("read %q, %v; want ready", l, err)
	}
	if err := sess.Signal(ssh.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	err = sess.Wait()
	if ee, ok := err.(*ssh.ExitError); !ok || ee.ExitStatus() != 3 || string(rest) != "got TERM\n" {
		t.Errorf("after a TERM signal request: %v, output %q; want exit 3 and got TERM", err, rest)
	}

	for _, req := range []string{"keepalive@openssh.com", "no-such-request@example.com"} {
		if ok, _, err := c.SendRequest(req, true, nil); err != nil || ok {
			t.Errorf("global request %s: %v, %v; want a failure reply", req, ok, err)
		}
	}
	// tcpip-forward (ssh -R) as Go's client asks for it: a port in the
	// box, its connections forwarded-tcpip channels; Close cancels it.
	l, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tcpip-forward: %v", err)
	}
	go func() {
		conn, err := l.Accept()
		if err == nil {
			io.Copy(conn, conn)
			conn.Close()
		}
	}()
	echoThrough(t, "tcp", l.Addr().String())
	if err := l.Close(); err != nil {
		t.Errorf("cancel-tcpip-forward: %v", err)
	}
	waitFor(t, nil, func() bool {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
	if _, _, err := c.OpenChannel("x11", nil); err == nil {
		t.Error("an x11 channel was accepted")
	}
	if _, _, err := c.SendRequest("no-more-sessions@openssh.com", false, nil); err != nil {
		t.Fatal(err)
	}
	// The request has no reply; a global request that has one shows it
	// was read before the session is asked for.
	c.SendRequest("keepalive@openssh.com", true, nil)
	if _, err := c.NewSession(); err == nil {
		t.Error("a session after no-more-sessions was accepted")
	}
}

// TestSSHStdioServerAlive: OpenSSH's ServerAliveInterval keepalives are
// answered: with one missed reply allowed, a session longer than two
// intervals would otherwise end with "Timeout, server not responding".
func TestSSHStdioServerAlive(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	c := s.cmd("-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=1", "main.cocoonbox", "sleep 3; echo alive")
	if out := runOK(t, c); out != "alive\n" {
		t.Errorf("output %q", out)
	}
}

// TestSSHStdioLoginShell: plain `ssh main.cocoonbox` on a terminal is a
// login shell on a terminal; what is typed runs, and its exit code is ssh's.
func TestSSHStdioLoginShell(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	env := append(append([]string{}, s.Env...), "TERM=xterm")
	p := startProgOnPTY(t, "ssh", env, "-F", s.Config, "main.cocoonbox")
	p.write("tty >/dev/null && echo ON-A-TTY; shopt -q login_shell 2>/dev/null || case $0 in -*) true;; *) false;; esac && echo LOGIN-SHELL; exit 5\r")
	p.waitFor("ON-A-TTY\r\n")
	p.waitFor("LOGIN-SHELL\r\n")
	p.wantExit(5)
}

// TestSSHStdioSuffix: --suffix names the suffix a Host block of another
// name uses; -v logs the requests on the ProxyCommand's stderr, which ssh
// passes on.
func TestSSHStdioSuffix(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	cfg := readFile(t, s.Config)
	cfg = strings.Replace(cfg, "Host *.cocoonbox", "Host *.box", 1)
	cfg = strings.Replace(cfg, " --stdio %h", " --stdio -v --suffix .box %h", 1)
	write(t, s.Config, cfg)
	write(t, filepath.Join(s.Dir, "known_hosts"), sshserve.KnownHostsLine("*.box", s.Key)+"\n")
	c := s.cmd("main.box", "echo ok")
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil || stdout.String() != "ok\n" {
		t.Fatalf("ssh main.box: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "cocoonbox-ssh: debug: session request exec") {
		t.Errorf("-v: stderr %q lacks the exec request", stderr.String())
	}
}

// TestSSHStdioForwardUnix: OpenSSH's ssh -L PORT:/path/to.sock through
// the ProxyCommand (a direct-streamlocal@openssh.com channel) reaches an
// HTTP server on a unix socket in the box (the local box shares this
// machine's files: the test's server stands for one in the box).
func TestSSHStdioForwardUnix(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "web.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// The box user connects to it.
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s on the socket", r.URL.Path)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	fw := s.cmd("-N", "-o", "ExitOnForwardFailure=yes", "-L", port+":"+sock, "main.cocoonbox")
	stderr, exited := startForward(t, fw, port)
	if got := runOK(t, exec.Command("curl", "-sS", "--noproxy", "*", "http://127.0.0.1:"+port+"/via-L")); got != "hello from /via-L on the socket" {
		t.Errorf("curl through -L to a unix socket: %q", got)
	}
	// cocoonbox-ssh's own -L PORT:/path, through the same relay.
	port2, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	startForward(t, inEnv(exec.Command(s.Shim, "-N", "-o", "ExitOnForwardFailure=yes", "-L", port2+":"+sock, "main"), s.Env), port2)
	if got := runOK(t, exec.Command("curl", "-sS", "--noproxy", "*", "http://127.0.0.1:"+port2+"/via-shim")); got != "hello from /via-shim on the socket" {
		t.Errorf("curl through cocoonbox-ssh -L to a unix socket: %q", got)
	}
	// A socket nobody listens on: the connection is closed, and ssh says
	// why in its "open failed" line.
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("curl", "-sS", "--noproxy", "*", "http://127.0.0.1:"+port+"/").CombinedOutput(); err == nil {
		t.Errorf("curl through -L to a removed socket: %q, want a failure", out)
	}
	// ssh prints the line before it closes the connection; once it has
	// exited its stderr is all there.
	fw.Process.Kill()
	<-exited
	if !strings.Contains(stderr.String(), "open failed") || !strings.Contains(stderr.String(), "connect to "+sock+" in box main") {
		t.Errorf("-L to a removed socket: ssh said %q; want open failed, the socket and why", stderr.String())
	}
}

// startForward starts c, a forwarding ssh or cocoonbox-ssh that runs
// until killed, waits until it listens on port, and kills it when the
// test ends. It returns c's stderr, to read once exited is closed.
func startForward(t *testing.T, c *exec.Cmd, port string) (*strings.Builder, chan struct{}) {
	t.Helper()
	stderr := &strings.Builder{}
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		c.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		c.Process.Kill()
		<-exited
	})
	waitListening(t, port, exited, stderr)
	return stderr, exited
}
