//go:build unix

package cli_test

import (
	"errors"
	"io"
	"net"
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

	"golang.org/x/crypto/ssh"

	"github.com/cocoonbox/cocoonbox/internal/loopback"
)

// boxClient is one way to reach a box with ssh's command line: OpenSSH's
// ssh through cocoonbox-ssh --stdio, or cocoonbox-ssh itself.
type boxClient struct {
	name string
	// cmd runs the client with options args for box main, then command.
	cmd func(args []string, command ...string) *exec.Cmd
	// ours is how the client prints a line of cocoonbox-ssh's own:
	// "cocoonbox-ssh: " and the line, ending as it ends it.
	ours func(line string) string
}

// boxClients are both clients of b.
func boxClients(t *testing.T, b *testBox) []boxClient {
	s := newStdioSSH(t, b)
	return []boxClient{
		{"ssh --stdio", func(args []string, command ...string) *exec.Cmd {
			return s.cmd(append(append(args, "main.cocoonbox"), command...)...)
		}, func(l string) string { return "cocoonbox-ssh: " + l + "\r\n" }},
		{"cocoonbox-ssh", func(args []string, command ...string) *exec.Cmd {
			return shimCmd(b, append(append(args, "main"), command...)...)
		}, func(l string) string { return "cocoonbox-ssh: " + l + "\n" }},
	}
}

// TestSSHRemoteForward: -R through either client listens in the box: a
// port the box chose, said as ssh says it with sshd, carrying bytes both
// ways; a port named, there before the command runs; a unix socket
// (0600, the box user's, removed when the client is killed); -R PORT
// alone, a SOCKS server at this end for the box's clients.
func TestSSHRemoteForward(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	d := startSSHD(t)
	echo := echoTarget(t)
	web := webTarget(t)
	for _, c := range boxClients(t, b) {
		background := func(t *testing.T, spec string) *bgSSH {
			return startBG(t, c.cmd([]string{"-N", "-o", "ExitOnForwardFailure=yes", "-R", spec}))
		}
		// allocated starts spec's forward through c and with sshd, checks
		// both say the same Allocated line, and returns the box's port.
		allocated := func(t *testing.T, spec string) string {
			m := background(t, spec).waitLine(t, allocatedRE)
			ref := startBG(t, exec.Command("ssh", "-F", d.Config, "-p", d.Port, "-N", "-R", spec, d.User+"@127.0.0.1"))
			if mref := ref.waitLine(t, allocatedRE); m[2] != mref[2] {
				t.Errorf("%s says %q, ssh with sshd %q", c.name, m[0], mref[0])
			}
			return m[1]
		}
		t.Run(c.name+"/allocated", func(t *testing.T) {
			echoThrough(t, "tcp", "127.0.0.1:"+allocated(t, "0:localhost:"+echo))
		})
		t.Run(c.name+"/port", func(t *testing.T) {
			port, err := freePort()
			if err != nil {
				t.Fatal(err)
			}
			fw := background(t, "127.0.0.1:"+port+":localhost:"+web)
			waitListening(t, port, fw.exited, &strings.Builder{})
			if got := runOK(t, exec.Command("curl", "-sS", "--noproxy", "*", "http://127.0.0.1:"+port+"/via-R")); got != "hello from /via-R" {
				t.Errorf("curl in the box through -R: %q", got)
			}
		})
		t.Run(c.name+"/command", func(t *testing.T) {
			// As with sshd, the listener is there before the command runs.
			port, err := freePort()
			if err != nil {
				t.Fatal(err)
			}
			if out := runOK(t, c.cmd([]string{"-R", port + ":localhost:" + web}, "curl -sS --noproxy '*' http://127.0.0.1:"+port+"/from-the-command")); out != "hello from /from-the-command" {
				t.Errorf("the command's curl through -R: %q", out)
			}
		})
		t.Run(c.name+"/unix socket", func(t *testing.T) {
			dir := t.TempDir()
			// The box user makes the socket there.
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(dir, "r.sock")
			fw := background(t, sock+":localhost:"+web)
			waitFor(t, fw.exited, func() bool { _, err := os.Lstat(sock); return err == nil })
			fi, err := os.Lstat(sock)
			if err != nil {
				t.Fatal(err)
			}
			ws, err := os.Stat(b.Workspace)
			if err != nil {
				t.Fatal(err)
			}
			if uid, boxUID := fi.Sys().(*syscall.Stat_t).Uid, ws.Sys().(*syscall.Stat_t).Uid; fi.Mode() != os.ModeSocket|0o600 || uid != boxUID {
				t.Errorf("socket %s: %v, uid %d; want a 0600 socket of the box user (%d)", sock, fi.Mode(), uid, boxUID)
			}
			if got := runOK(t, exec.Command("curl", "-sS", "--unix-socket", sock, "http://box/via-socket")); got != "hello from /via-socket" {
				t.Errorf("curl in the box through -R on a socket: %q", got)
			}
			// Killed, the client's Exec ends, and the box's listener with it.
			fw.cmd.Process.Kill()
			<-fw.exited
			waitFor(t, nil, func() bool { _, err := os.Lstat(sock); return os.IsNotExist(err) })
		})
		t.Run(c.name+"/refused here", func(t *testing.T) {
			// Nothing listens at this end: the box's client sees its
			// connection closed, and the forward goes on.
			closed, err := freePort()
			if err != nil {
				t.Fatal(err)
			}
			m := background(t, "0:127.0.0.1:"+closed).waitLine(t, allocatedRE)
			for range 2 {
				conn, err := net.Dial("tcp", "127.0.0.1:"+m[1])
				if err != nil {
					t.Fatal(err)
				}
				conn.SetReadDeadline(time.Now().Add(time.Minute))
				if n, err := conn.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
					t.Errorf("a connection -R could not make here: read %d, %v; want EOF", n, err)
				}
				conn.Close()
			}
		})
		t.Run(c.name+"/dynamic", func(t *testing.T) {
			port := allocated(t, "0")
			// No --noproxy: it would take curl past the SOCKS server too.
			if got := runOK(t, exec.Command("curl", "-sS", "--socks5-hostname", "127.0.0.1:"+port, "http://localhost:"+web+"/socks")); got != "hello from /socks" {
				t.Errorf("curl in the box through -R's SOCKS server: %q", got)
			}
		})
	}
}

// TestSSHRemoteForwardInUse: a -R port in use in the box, through either
// client, is what it is with sshd, run the same way side by side: ssh's
// warning and the command run, or with ExitOnForwardFailure its error
// and 255 (cocoonbox-ssh's own says it in its one line); each time one
// line gives the box's reason.
func TestSSHRemoteForwardInUse(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	d := startSSHD(t)
	port := usedPort(t)
	spec := "127.0.0.1:" + port + ":localhost:9"
	reason := "listen on 127.0.0.1:" + port + " in box main: address already in use"
	for _, c := range boxClients(t, b) {
		for _, exitOnFailure := range []string{"no", "yes"} {
			args := []string{"-o", "ExitOnForwardFailure=" + exitOnFailure, "-R", spec}
			got := runResult(c.cmd(args, "echo ran"))
			ref := runResult(exec.Command("ssh", append(append([]string{"-F", d.Config, "-p", d.Port}, args...), d.User+"@127.0.0.1", "echo ran")...))
			// ssh's own lines, and one of ours.
			want := ref
			switch {
			case c.name == "ssh --stdio":
				want.Stderr = c.ours("remote forwarding: "+reason) + ref.Stderr
			case exitOnFailure == "yes":
				want.Stderr = c.ours("remote port forwarding failed for listen port " + port + ": " + reason)
			default:
				want.Stderr = strings.TrimSuffix(ref.Stderr, "\r\n") + ": " + reason + "\r\n"
			}
			if got != want {
				t.Errorf("%s, ExitOnForwardFailure=%s: got %+v\nwant %+v (ssh with sshd: %+v)", c.name, exitOnFailure, got, want, ref)
			}
		}
	}
}

// runResult runs c and returns what it did.
func runResult(c *exec.Cmd) result {
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	c.Run()
	return result{Stdout: stdout.String(), Stderr: stderr.String(), Code: c.ProcessState.ExitCode()}
}

// TestSSHAgentForward: -A through either client, with a local ssh-agent
// holding the only key a GitHub stand-in (an sshd) accepts: git push from
// the box to it works through the forwarded agent, ssh-add -l in the box
// lists the laptop's key; the agent socket is 0600 in a 0700 directory,
// both the box user's, and both are gone when the session ends. Without
// -A the box gets no SSH_AUTH_SOCK.
func TestSSHAgentForward(t *testing.T) {
	t.Parallel()
	gh := githubStandIn(t)
	sock := agentWithKey(t, gh.Key)
	b := startBox(t)
	runOK(t, shimCmd(b, "main", "true"))
	boxKnownHosts(t, gh, b.Workspace)
	for _, c := range boxClients(t, b) {
		t.Run(c.name, func(t *testing.T) {
			// IdentityAgent names the agent ssh forwards (the test config's
			// "none" would unset SSH_AUTH_SOCK); -A overrides the block's
			// ForwardAgent no.
			checkPush(t, runOK(t, c.cmd([]string{"-A", "-o", "IdentityAgent=" + sock}, pushScript(gh))), sock, gh, b.Workspace)
			// -o ForwardAgent=PATH names the socket itself (OpenSSH 9.2's
			// ssh forwards it only when IdentityAgent is not none too).
			checkPush(t, runOK(t, c.cmd([]string{"-o", "ForwardAgent=" + sock, "-o", "IdentityAgent=" + sock}, pushScript(gh))), sock, gh, b.Workspace)
			for _, args := range [][]string{{"-a"}, {}} {
				if out := runOK(t, c.cmd(append(args, "-o", "IdentityAgent="+sock), `echo "[$SSH_AUTH_SOCK]"`)); out != "[]\n" {
					t.Errorf("%q: the box got SSH_AUTH_SOCK %q, want none", args, out)
				}
			}
			// An agent that cannot be reached here is not forwarded, as
			// ssh's check_agent_present leaves it: no SSH_AUTH_SOCK, no
			// line.
			missing := filepath.Join(t.TempDir(), "gone.sock")
			if got := runResult(c.cmd([]string{"-A", "-o", "IdentityAgent=" + missing}, `echo "[$SSH_AUTH_SOCK]"`)); got != (result{Stdout: "[]\n"}) {
				t.Errorf("-A with no agent at %s: %+v; want no SSH_AUTH_SOCK and nothing on stderr", missing, got)
			}
		})
	}
	// cocoonbox-ssh -A with no agent here: none for the box either.
	if out := runOK(t, shimCmd(b, "-A", "main", `echo "[$SSH_AUTH_SOCK]"`)); out != "[]\n" {
		t.Errorf("-A without an agent: the box got SSH_AUTH_SOCK %q, want none", out)
	}
}

// TestSSHForwardNoListener: a box whose cocoonbox-agent predates the
// listen verb: through either client, -R is ssh's failure with one line
// naming the cause, and -A runs the command without SSH_AUTH_SOCK after
// one line saying why.
func TestSSHForwardNoListener(t *testing.T) {
	t.Parallel()
	old := t.TempDir()
	write(t, filepath.Join(old, "cocoonbox-agent"), "#!/bin/sh\necho '{\"ok\":false,\"code\":\"usage\",\"error\":\"unknown command\"}'\nexit 2\n")
	os.Chmod(filepath.Join(old, "cocoonbox-agent"), 0o755)
	b := startBoxWith(t, old)
	const cause = "box main: the box's cocoonbox-agent has no listen verb (remote and agent forwarding need it)"
	key := filepath.Join(t.TempDir(), "key")
	runOK(t, exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key))
	sock := agentWithKey(t, key)
	for _, c := range boxClients(t, b) {
		got := runResult(c.cmd([]string{"-o", "ExitOnForwardFailure=yes", "-R", "0:localhost:9"}, "echo ran"))
		if got.Code != 255 || got.Stdout != "" || !strings.Contains(got.Stderr, cause) {
			t.Errorf("%s -R: %+v; want 255 and a line naming the cause", c.name, got)
		}
		got = runResult(c.cmd([]string{"-A", "-o", "IdentityAgent=" + sock}, `echo "[$SSH_AUTH_SOCK]"`))
		if got.Code != 0 || got.Stdout != "[]\n" || strings.Count(got.Stderr, "\n") != 1 || !strings.Contains(got.Stderr, "agent forwarding") || !strings.Contains(got.Stderr, cause) {
			t.Errorf("%s -A: %+v; want the command run without SSH_AUTH_SOCK, and one line naming the cause", c.name, got)
		}
	}
}

// TestSSHRemoteForwardFamilies: a -R bound to an address of one family
// listens on that family only, as sshd (GatewayPorts clientspecified)
// binds it, through either client: 0.0.0.0 is not reached on ::1, nor
// [::] on 127.0.0.1.
func TestSSHRemoteForwardFamilies(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	d := startSSHD(t, "GatewayPorts clientspecified")
	echo := echoTarget(t)
	// reached says which loopback addresses accept on port.
	reached := func(port string) []string {
		var got []string
		for _, h := range []string{"127.0.0.1", "::1"} {
			if c, err := net.Dial("tcp", net.JoinHostPort(h, port)); err == nil {
				c.Close()
				got = append(got, h)
			}
		}
		return got
	}
	// forward runs spec's forward through cmd with a command that says
	// ready once the listener is there, and returns which addresses reach
	// it.
	forward := func(t *testing.T, port string, cmd func(args []string, command ...string) *exec.Cmd, bind string) []string {
		args := []string{"-o", "ExitOnForwardFailure=yes", "-R", bind + ":" + port + ":localhost:" + echo}
		if ready, stderr := startLine(t, cmd(args, "echo ready; exec cat >/dev/null")); ready != "ready" {
			t.Fatalf("%s: %q; stderr: %s", args, ready, stderr)
		}
		return reached(port)
	}
	sshd := func(args []string, command ...string) *exec.Cmd {
		return exec.Command("ssh", append(append(append([]string{"-F", d.Config, "-p", d.Port}, args...), d.User+"@127.0.0.1"), command...)...)
	}
	for _, bind := range []string{"0.0.0.0", "[::]"} {
		t.Run(bind, func(t *testing.T) {
			port, err := freePort()
			if err != nil {
				t.Fatal(err)
			}
			want := forward(t, port, sshd, bind)
			if len(want) != 1 {
				t.Fatalf("ssh with sshd: -R %s:%s reached on %q; want one family", bind, port, want)
			}
			for _, c := range boxClients(t, b) {
				port, err := freePort()
				if err != nil {
					t.Fatal(err)
				}
				if got := forward(t, port, c.cmd, bind); !slices.Equal(got, want) {
					t.Errorf("%s: -R %s:%s reached on %q; ssh with sshd on %q", c.name, bind, port, got, want)
				}
			}
		})
	}
	// Every address ("*") is a socket for each family, either being
	// enough: with IPv4's port taken, the forward listens on IPv6's.
	t.Run("* with 0.0.0.0 taken", func(t *testing.T) {
		clients := append([]boxClient{{name: "ssh with sshd", cmd: sshd}}, boxClients(t, b)...)
		for _, c := range clients {
			l, err := net.Listen("tcp4", "0.0.0.0:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
			if got := forward(t, port, c.cmd, "*"); !slices.Contains(got, "::1") {
				t.Errorf("%s: -R *:%s with 0.0.0.0:%[2]s taken reached on %q; want ::1 too", c.name, port, got)
			}
		}
	})
}

// TestSSHRemoteForwardHibernate: ssh -N -R to a hibernated box wakes
// it and says so, as a command does (box main: waking...), then
// listens; and once the box hibernates again the listener is gone, so ssh
// does not go on as a connection that forwards nothing: as when sshd goes
// away, it ends with 255 after one line naming the forward and why, and
// whatever restarts it (autossh, a unit) listens again. Through either
// client.
func TestSSHRemoteForwardHibernate(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	web := webTarget(t)
	sleep := func(t *testing.T) { runOK(t, inEnv(exec.Command("cocoonbox", "boxes", "sleep", "main"), b.Env)) }
	for _, c := range boxClients(t, b) {
		t.Run(c.name, func(t *testing.T) {
			sleep(t)
			port, err := freePort()
			if err != nil {
				t.Fatal(err)
			}
			fw := startBG(t, c.cmd([]string{"-N", "-R", port + ":localhost:" + web}))
			fw.waitLine(t, regexp.MustCompile(`^box main: waking`))
			waitListening(t, port, fw.exited, &strings.Builder{})
			sleep(t)
			select {
			case <-fw.exited:
			case <-time.After(time.Minute):
				t.Fatal("ssh -N -R still runs a minute after the box hibernated")
			}
			var lines []string
			for l := range fw.lines {
				lines = append(lines, l)
			}
			// (waitListening's connection, still being taken when the
			// box went, may have a line of its own.)
			named := slices.ContainsFunc(lines, func(l string) bool {
				return strings.HasPrefix(l, "cocoonbox-ssh: remote forwarding of localhost:"+port+" in box main ended: ")
			})
			if code := fw.cmd.ProcessState.ExitCode(); code != 255 || !named {
				t.Errorf("exit %d, stderr %q; want 255 after a line naming the forward", code, lines)
			}
		})
	}
}

// TestSSHHalfCloseInBox: the box's end of a forwarded connection may
// half-close and still hear back, as through sshd, run side by side: a
// client in the box that sends its request and shuts down its write side
// (nc -N, a Docker client's hijacked stdin) gets the answer of -R's
// target here, and a target in the box that shuts down its write side
// first (-L) still receives what is sent after.
func TestSSHHalfCloseInBox(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	d := startSSHD(t)
	// answer reads a request to its EOF, then answers it and closes.
	_, answerPort := loopback.TCP(t, func(c net.Conn) {
		req, _ := io.ReadAll(c)
		c.Write([]byte("answer to " + string(req)))
	})
	// first says hello and shuts down its write side, then reports what
	// it read to its EOF on got.
	got := make(chan string, 10)
	_, firstPort := loopback.TCP(t, func(c net.Conn) {
		c.Write([]byte("hello"))
		c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		got <- string(b)
	})
	sshd := func(args []string, command ...string) *exec.Cmd {
		return exec.Command("ssh", append(append(append([]string{"-F", d.Config, "-p", d.Port}, args...), d.User+"@127.0.0.1"), command...)...)
	}
	clients := append([]boxClient{{name: "ssh with sshd", cmd: sshd}}, boxClients(t, b)...)
	for _, c := range clients {
		t.Run(c.name+"/-R", func(t *testing.T) {
			conn := forwardedConn(t, c.cmd, "-R", answerPort)
			conn.Write([]byte("ping"))
			conn.CloseWrite()
			conn.SetReadDeadline(time.Now().Add(time.Minute))
			if b, err := io.ReadAll(conn); string(b) != "answer to ping" {
				t.Errorf("a client in the box that half-closed read %q, %v; want the answer", b, err)
			}
		})
		t.Run(c.name+"/-L", func(t *testing.T) {
			conn := forwardedConn(t, c.cmd, "-L", firstPort)
			conn.SetReadDeadline(time.Now().Add(time.Minute))
			if b, err := io.ReadAll(conn); string(b) != "hello" {
				t.Fatalf("read %q, %v; want hello and EOF", b, err)
			}
			conn.Write([]byte("after your EOF"))
			conn.CloseWrite()
			select {
			case s := <-got:
				if s != "after your EOF" {
					t.Errorf("a target in the box that half-closed read %q after; want what was sent", s)
				}
			case <-time.After(time.Minute):
				t.Error("the target in the box read nothing to its EOF within a minute")
			}
		})
	}
}

// forwardedConn starts a forward (flag -L or -R) from a free loopback
// port to port on 127.0.0.1 through cmd, with a command that holds it
// open, and returns a connection to it, closed when the test ends.
func forwardedConn(t *testing.T, cmd func(args []string, command ...string) *exec.Cmd, flag string, port uint32) *net.TCPConn {
	t.Helper()
	listen, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-o", "ExitOnForwardFailure=yes", flag, listen + ":127.0.0.1:" + strconv.Itoa(int(port))}
	if ready, stderr := startLine(t, cmd(args, "echo ready; exec cat >/dev/null")); ready != "ready" {
		t.Fatalf("%s: %q; stderr: %s", args, ready, stderr)
	}
	conn, err := net.Dial("tcp", "127.0.0.1:"+listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn.(*net.TCPConn)
}

// TestSSHRemoteForwardCloseWithoutEOF: a client that writes its answer
// on a forwarded-tcpip channel and closes it without an EOF first (Go's
// and Paramiko's Close) has the answer reach the box's end, as sshd
// drains a channel before it closes it: run beside sshd with Go's client.
func TestSSHRemoteForwardCloseWithoutEOF(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	d := startSSHD(t)
	key, err := ssh.ParsePrivateKey([]byte(readFile(t, filepath.Join(filepath.Dir(d.Config), "user"))))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ssh.Dial("tcp", "127.0.0.1:"+d.Port, &ssh.ClientConfig{User: d.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(key)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for name, c := range map[string]*ssh.Client{"sshd": ref, "--stdio": goClient(t, b)} {
		l, err := c.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("%s: tcpip-forward: %v", name, err)
		}
		go func() {
			for {
				ch, err := l.Accept()
				if err != nil {
					return
				}
				ch.Write([]byte("the answer"))
				ch.Close()
			}
		}()
		for range 5 {
			conn, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(time.Minute))
			if got, err := io.ReadAll(conn); string(got) != "the answer" {
				t.Errorf("%s: the box's end read %q, %v; want the answer written before the close", name, got, err)
			}
			conn.Close()
		}
		l.Close()
	}
}

// TestSSHRemoteForwardDashPath: a streamlocal-forward path that starts
// with "-" is a path (relative: from the workspace) like any other, not
// an option of the box's listener.
func TestSSHRemoteForwardDashPath(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	l, err := goClient(t, b).ListenUnix("-dash.sock")
	if err != nil {
		t.Fatalf("streamlocal-forward -dash.sock: %v", err)
	}
	defer l.Close()
	if fi, err := os.Lstat(filepath.Join(b.Workspace, "-dash.sock")); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("the workspace's -dash.sock: %v, %v; want the forward's socket", fi, err)
	}
}
