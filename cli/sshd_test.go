package cli_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/localbox"
	"github.com/cocoonbox/cocoonbox/shim"
)

// sshdPath is OpenSSH's server, from openssh-server (scripts/deps.sh).
const sshdPath = "/usr/sbin/sshd"

// sshd is an OpenSSH server on a loopback port, running as the current
// user, which it lets in with a generated key.
type sshd struct {
	// Port is the port it listens on, on 127.0.0.1.
	Port string
	// User is the user it lets in: the current one.
	User string
	// Config is an ssh_config for the client: the key, the pinned host key,
	// no prompts. Pass it with ssh -F.
	Config string
}

// startSSHD starts sshd with a generated host key and user key, accepting
// the variables of the box's AcceptEnv (shim.AcceptEnv) from SendEnv and
// SetEnv, with the sshd_config lines of extra after its own, and stops it
// when the test ends.
func startSSHD(t *testing.T, extra ...string) *sshd {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		t.Fatalf("%v: install openssh-server (scripts/deps.sh)", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, k := range []string{"host", "user"} {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", k, "-f", filepath.Join(dir, k)).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	userPub, err := os.ReadFile(filepath.Join(dir, "user.pub"))
	if err != nil {
		t.Fatal(err)
	}
	hostPub, err := os.ReadFile(filepath.Join(dir, "host.pub"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "authorized_keys"), string(userPub))
	if os.Getuid() == 0 {
		// sshd's privilege separation directory, which Debian makes at boot.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// sshd cannot take a listener, so a free port is found first; another
	// process may take it in between, hence a few tries.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, "sshd_config")
		write(t, cfg, fmt.Sprintf(`ListenAddress 127.0.0.1:%s
HostKey %s
AuthorizedKeysFile %s
PermitRootLogin yes
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PrintMotd no
PrintLastLog no
UseDNS no
AcceptEnv %s
PidFile none
LogLevel ERROR
Subsystem sftp /usr/lib/openssh/sftp-server
%s
`, port, filepath.Join(dir, "host"), filepath.Join(dir, "authorized_keys"), strings.Join(shim.AcceptEnv, " "), strings.Join(extra, "\n")))
		if lastErr = runSSHD(t, cfg); lastErr != nil {
			continue
		}
		client := filepath.Join(dir, "ssh_config")
		write(t, filepath.Join(dir, "known_hosts"), fmt.Sprintf("[127.0.0.1]:%s %s", port, hostPub))
		write(t, client, fmt.Sprintf(`Host *
  IdentityFile %s
  IdentitiesOnly yes
  IdentityAgent none
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
  BatchMode yes
  ControlMaster no
`, filepath.Join(dir, "user"), filepath.Join(dir, "known_hosts")))
		return &sshd{Port: port, User: u.Username, Config: client}
	}
	t.Fatalf("sshd did not start: %v", lastErr)
	return nil
}

// runSSHD starts sshd with cfg in the foreground, logging to stderr, and
// waits for it to listen.
func runSSHD(t *testing.T, cfg string) error {
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	// -D -e with LogLevel ERROR prints nothing once it listens, so wait for
	// the port to accept; sshd's own errors end it and close the pipe.
	var log bytes.Buffer
	var mu sync.Mutex
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
		exited <- cmd.Wait()
	}()
	addr := ""
	for _, l := range strings.Split(readFile(t, cfg), "\n") {
		if a, ok := strings.CutPrefix(l, "ListenAddress "); ok {
			addr = a
		}
	}
	for {
		select {
		case err := <-exited:
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("sshd exited: %v\n%s", err, log.String())
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			// sshd answers with its version line once it serves.
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "SSH-2.0-") {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() && log.Len() > 0 {
			t.Logf("sshd log:\n%s", log.String())
		}
	})
	return nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// testBox is a local box served by the test process on loopback.
type testBox struct {
	// Env is what a client needs to reach it: COCOONBOX_ENDPOINT and
	// COCOONBOX_TOKEN, and a HOME of its own.
	Env []string
	// Addr is the address it listens on, URL its endpoint, Token a token
	// it accepts.
	Addr, URL, Token string
	// Workspace is box main's workspace directory.
	Workspace string
	srv       *localbox.Server
}

// startBox starts a local box for the test and stops it when the test ends;
// each option may set fields of its Server first.
func startBox(t testing.TB, options ...func(*localbox.Server)) *testBox {
	t.Helper()
	bin, err := exec.LookPath("cocoonbox")
	if err != nil {
		t.Fatal(err)
	}
	return startBoxWith(t, filepath.Dir(bin), options...)
}

// startBoxWith is startBox with binDir first on the box's PATH instead of
// the directory of our binaries.
func startBoxWith(t testing.TB, binDir string, options ...func(*localbox.Server)) *testBox {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	srv := &localbox.Server{Dir: state, BinDir: binDir}
	for _, o := range options {
		o(srv)
	}
	lis, url, err := localbox.Listen(state, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := localbox.IssueToken(state, "test", "cli")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return &testBox{
		URL:       url,
		Token:     tok,
		Env:       []string{"COCOONBOX_ENDPOINT=" + url, "COCOONBOX_TOKEN=" + tok, "HOME=" + home, "PATH=" + os.Getenv("PATH")},
		Addr:      lis.Addr().String(),
		Workspace: filepath.Join(state, "boxes", localbox.DefaultBox, "workspace"),
		srv:       srv,
	}
}

func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
