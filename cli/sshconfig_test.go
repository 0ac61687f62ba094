package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSSHConfigOpenSSH writes the block with cocoonbox ssh-config and
// reaches the box through it with the real OpenSSH tools: ssh, scp (SFTP
// and -O), sftp, rsync -e ssh, git push and clone, ssh -L with curl. The
// ProxyCommand's path has a space and a %; the host key is pinned with
// StrictHostKeyChecking on, so a wrong pin is refused.
func TestSSHConfigOpenSSH(t *testing.T) {
	tb := startBox(t)
	home := ""
	for _, kv := range tb.Env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	real, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "my tools", "100%")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "cocoonbox-ssh")); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) (string, string, error) {
		cmd := exec.Command(name, args...)
		cmd.Env = tb.Env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	if _, errs, err := run("cocoonbox", "ssh-config", "--ssh-path", filepath.Join(dir, "cocoonbox-ssh")); err != nil {
		t.Fatalf("ssh-config: %v\n%s", err, errs)
	}
	cfg := filepath.Join(home, ".ssh", "config")
	// OpenSSH reads the passwd entry's ~/.ssh/config, not $HOME's: -F.
	out, errs, err := run("ssh", "-F", cfg, "main.cocoonbox", "echo", "ok", "from", `"$COCOONBOX_BOX"`)
	if err != nil || out != "ok from main\n" || errs != "" {
		t.Errorf("ssh main.cocoonbox: %q, stderr %q, %v", out, errs, err)
	}

	// The tools of the issue, each through the block.
	src := t.TempDir()
	write(t, filepath.Join(src, "f.txt"), "a file\n")
	sshCmd := "ssh -F '" + cfg + "'"
	for _, step := range []struct {
		name string
		argv []string
	}{
		{"scp", []string{"scp", "-F", cfg, filepath.Join(src, "f.txt"), "main.cocoonbox:"}},
		{"scp -O", []string{"scp", "-O", "-F", cfg, filepath.Join(src, "f.txt"), "main.cocoonbox:g.txt"}},
		{"sftp", []string{"sh", "-c", "echo 'get f.txt " + filepath.Join(src, "back.txt") + "' | sftp -q -F '" + cfg + "' -b - main.cocoonbox"}},
		{"rsync", []string{"rsync", "-a", "-e", sshCmd, src + "/", "main.cocoonbox:tree/"}},
		{"git init", []string{"ssh", "-F", cfg, "main.cocoonbox", "git init -q --bare repo.git"}},
		{"git push", []string{"sh", "-c", "cd '" + src + "' && git init -q && git add f.txt && git -c user.name=T -c user.email=t@example.com commit -qm one && GIT_SSH_COMMAND=\"" + sshCmd + "\" git push -q main.cocoonbox:repo.git HEAD:refs/heads/main"}},
		{"git clone", []string{"sh", "-c", "GIT_SSH_COMMAND=\"" + sshCmd + "\" git clone -q -b main main.cocoonbox:repo.git '" + filepath.Join(src, "clone") + "'"}},
	} {
		if out, errs, err := run(step.argv[0], step.argv[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s%s", step.name, err, out, errs)
		}
	}
	for name, want := range map[string]string{
		filepath.Join(tb.Workspace, "f.txt"):         "a file\n",
		filepath.Join(tb.Workspace, "g.txt"):         "a file\n",
		filepath.Join(src, "back.txt"):               "a file\n",
		filepath.Join(tb.Workspace, "tree", "f.txt"): "a file\n",
		filepath.Join(src, "clone", "f.txt"):         "a file\n",
	} {
		if got := readFile(t, name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	// ssh -L to an HTTP server in the box, fetched with curl.
	httpPort := boxHTTP(t, tb)
	lp, _ := freePort()
	fwd := exec.Command("ssh", "-F", cfg, "-o", "ExitOnForwardFailure=yes", "-L", lp+":localhost:"+httpPort, "main.cocoonbox", "echo ready; exec sleep 600")
	fwd.Env = tb.Env
	if ready, _ := startLine(t, fwd); ready != "ready" {
		t.Fatalf("ssh -L: %q", ready)
	}
	if got, err := curl(t, "http://127.0.0.1:"+lp+"/hello.txt"); err != nil || got != "hello from the box\n" {
		t.Errorf("curl through ssh -L: %q, %v", got, err)
	}

	// Another key in our known_hosts: OpenSSH refuses the box.
	kh := filepath.Join(home, ".local", "state", "cocoonbox", "ssh_known_hosts")
	good := readFile(t, kh)
	other := filepath.Join(t.TempDir(), "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	write(t, kh, "cocoonbox "+readFile(t, other+".pub"))
	// refused: OpenSSH refuses the box loudly, and our line names the fix;
	// nothing pins the key again behind the user's back.
	refused := func(what, wantOurs string) {
		t.Helper()
		before := readFile(t, kh)
		out, errs, err := run("ssh", "-F", cfg, "main.cocoonbox", "echo", "ok")
		if readFile(t, kh) != before {
			t.Errorf("ssh with %s changed the pin", what)
		}
		if err == nil || out != "" || !strings.Contains(errs, "Host key verification failed") || !strings.Contains(errs, wantOurs) {
			t.Errorf("ssh with %s: %q, stderr %q, %v; want it refused, with %q", what, out, errs, err, wantOurs)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	pinLine := "cocoonbox-ssh: " + kh + " does not pin the host key in " + filepath.Join(filepath.Dir(kh), "ssh_host_ed25519_key") + ", so ssh refuses the connection; to pin the key again, run: cocoonbox ssh-config\n"
	refused("another key pinned", pinLine)
	repin := func() {
		t.Helper()
		if _, errs, err := run("cocoonbox", "ssh-config", "--ssh-path", filepath.Join(dir, "cocoonbox-ssh")); err != nil {
			t.Fatalf("ssh-config: %v\n%s", err, errs)
		}
		if out, errs, err := run("ssh", "-F", cfg, "main.cocoonbox", "true"); err != nil || errs != "" {
			t.Fatalf("ssh after ssh-config: %v\n%s%s", err, out, errs)
		}
	}
	// ssh-config again pins the right key.
	repin()
	if got := readFile(t, kh); got != good {
		t.Errorf("known_hosts after ssh-config: %q, want %q", got, good)
	}

	// An edited pin (one letter of the key changed) is refused the same way.
	fields := strings.Fields(good)
	k := []byte(fields[2])
	k[len(k)-5] ^= 1
	write(t, kh, fields[0]+" "+fields[1]+" "+string(k)+"\n")
	refused("an edited pin", pinLine)
	repin()

	// The host key file replaced by another key: refused, and ssh-config
	// pins the new one.
	hostKey := filepath.Join(filepath.Dir(kh), "ssh_host_ed25519_key")
	write(t, hostKey, readFile(t, other))
	refused("a replaced host key", pinLine)
	repin()
	if got := readFile(t, kh); got == good || !strings.Contains(got, strings.Fields(readFile(t, other+".pub"))[1]) {
		t.Errorf("known_hosts after ssh-config with a new host key: %q", got)
	}

	// A host key file that is no key: cocoonbox-ssh says so and how to fix
	// it, and ssh-config refuses to pin anything.
	write(t, hostKey, "garbage\n")
	out, errs, err = run("ssh", "-F", cfg, "main.cocoonbox", "echo", "ok")
	if err == nil || out != "" || !strings.Contains(errs, "cocoonbox-ssh: host key "+hostKey+": ") || !strings.Contains(errs, "remove it to make a new one (and run `cocoonbox ssh-config` again to pin it)") {
		t.Errorf("ssh with a broken host key file: %q, stderr %q, %v", out, errs, err)
	}
	pinned := readFile(t, kh)
	if _, errs, err := run("cocoonbox", "ssh-config", "--ssh-path", filepath.Join(dir, "cocoonbox-ssh")); err == nil || !strings.Contains(errs, "remove it to make a new one") {
		t.Errorf("ssh-config with a broken host key file: %v, %q; want it refused", err, errs)
	}
	if readFile(t, kh) != pinned {
		t.Error("ssh-config changed the pin with a broken host key file")
	}
	os.Remove(hostKey)
	repin()
}

// TestSSHConfigOverGlobals: the block wins over the global options and
// Include at the top of a user's ~/.ssh/config (OpenSSH takes the first
// value it reads), so the real ssh main.cocoonbox checks our pin, writes
// nothing to the user's known_hosts and prints nothing; the user's own
// Host block and globals still apply to other hosts. $HOME holds a %,
// which the block escapes.
func TestSSHConfigOverGlobals(t *testing.T) {
	tb := startBox(t)
	home := filepath.Join(t.TempDir(), "h%u")
	mine := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	userKnown := filepath.Join(mine, "known_hosts")
	incKnown := filepath.Join(mine, "included_known_hosts")
	inc := filepath.Join(mine, "included.conf")
	write(t, inc, "Host *\n  UserKnownHostsFile "+incKnown+"\n  StrictHostKeyChecking no\n  HostKeyAlias included\n")
	cfg := filepath.Join(home, ".ssh", "config")
	write(t, cfg, "UserKnownHostsFile "+userKnown+"\nStrictHostKeyChecking accept-new\nInclude "+inc+"\nServerAliveInterval 17\n\nHost other\n  User someone\n")
	env := append(append([]string{}, tb.Env...), "HOME="+home)
	run := func(name string, args ...string) (string, string, error) {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	shim, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	if _, errs, err := run("cocoonbox", "ssh-config", "--ssh-path", shim); err != nil {
		t.Fatalf("ssh-config: %v\n%s", err, errs)
	}
	ourKnown := filepath.Join(home, ".local", "state", "cocoonbox", "ssh_known_hosts")
	g := func(host string) map[string]string {
		out, errs, err := run("ssh", "-F", cfg, "-G", host)
		if err != nil {
			t.Fatalf("ssh -G %s: %v\n%s", host, err, errs)
		}
		m := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			k, v, _ := strings.Cut(l, " ")
			m[k] = v
		}
		return m
	}
	for host, want := range map[string]map[string]string{
		"main.cocoonbox": {"userknownhostsfile": ourKnown, "stricthostkeychecking": "true", "hostkeyalias": "cocoonbox", "serveraliveinterval": "17"},
		"other":          {"userknownhostsfile": userKnown, "stricthostkeychecking": "accept-new", "hostkeyalias": "included", "user": "someone", "serveraliveinterval": "17"},
	} {
		got := g(host)
		for k, w := range want {
			if got[k] != w {
				t.Errorf("ssh -G %s: %s %q, want %q", host, k, got[k], w)
			}
		}
	}
	out, errs, err := run("ssh", "-F", cfg, "main.cocoonbox", "echo", "ok")
	if err != nil || out != "ok\n" || errs != "" {
		t.Errorf("ssh main.cocoonbox: %q, stderr %q, %v; want ok and nothing on stderr", out, errs, err)
	}
	for _, f := range []string{userKnown, incKnown} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("ssh wrote %s:\n%s", f, readFile(t, f))
		}
	}
}
