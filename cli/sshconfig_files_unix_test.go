//go:build unix

package cli_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sshConfigRun runs cocoonbox ssh-config with args in env and returns
// its exit status and stderr; it fails the test if it takes more than
// ten seconds (an open of a FIFO blocks until a writer comes).
func sshConfigRun(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "cocoonbox", append([]string{"ssh-config", "--ssh-path", "/opt/cb/cocoonbox-ssh"}, args...)...)
	c.Env = env
	var stderr bytes.Buffer
	c.Stderr = &stderr
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("ssh-config %s: still running after 10 s", strings.Join(args, " "))
	}
	if _, ok := errors.AsType[*exec.ExitError](err); err != nil && !ok {
		t.Fatal(err)
	}
	return c.ProcessState.ExitCode(), stderr.String()
}

// checkOneLine fails unless code is 1 and stderr one line matching re.
func checkOneLine(t *testing.T, what string, code int, stderr, re string) {
	t.Helper()
	if code != 1 || strings.Count(stderr, "\n") != 1 || !regexp.MustCompile("^"+re+"\n$").MatchString(stderr) {
		t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 1 and one line matching %s", what, code, stderr, re)
	}
}

// TestSSHConfigNotRegular: a FIFO, a device, a directory, a socket or a
// file past 4 MiB in the ssh_config's place is refused in one line,
// before it is opened or read (a FIFO's open would block, /dev/zero's
// read run out of memory), whatever the mode, and nothing is written.
func TestSSHConfigNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A socket path must be short (108 bytes on Linux).
	sdir, err := os.MkdirTemp("", "cbsock")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sdir)
	sock := filepath.Join(sdir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("Host x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 5<<20); err != nil {
		t.Fatal(err)
	}
	const next = `; nothing was changed; name the ssh_config file with --file FILE, or paste the block of --print yourself`
	// removed: --remove's line, when not want (exit 0 then).
	cases := []struct {
		name, file, want, removed string
	}{
		{"fifo", fifo, regexp.QuoteMeta(fifo) + ` is a named pipe \(FIFO\), not a regular file` + next, ""},
		{"dev-zero", "/dev/zero", `/dev/zero is a character device, not a regular file` + next, ""},
		{"directory", dir, regexp.QuoteMeta(dir) + ` is a directory, not a regular file; nothing was changed; name a file in it, such as: cocoonbox ssh-config --file ` + regexp.QuoteMeta(filepath.Join(dir, "config")), ""},
		{"socket", sock, regexp.QuoteMeta(sock) + ` is a socket, not a regular file` + next, ""},
		// Larger than it reads: --remove streams it (sshconfig_large).
		{"too-large", big, regexp.QuoteMeta(big) + ` is larger than 4 MiB, which ssh-config does not read; nothing was changed; make it smaller \(move Host blocks into a file it Includes\), or paste the block of --print yourself \(--remove still takes the block out\)`,
			regexp.QuoteMeta(big) + ` has no cocoonbox block; nothing to remove`},
	}
	for _, tc := range cases {
		for _, mode := range [][]string{nil, {"--dry-run"}, {"--remove"}} {
			home := t.TempDir()
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
			code, stderr := sshConfigRun(t, env, append(mode, "--file", tc.file)...)
			if tc.removed != "" && len(mode) > 0 && mode[0] == "--remove" {
				if !regexp.MustCompile("^cocoonbox: "+tc.removed+"\n$").MatchString(stderr) || code != 0 {
					t.Errorf("%s --remove: exit %d, %q; want exit 0 and %s", tc.name, code, stderr, tc.removed)
				}
				continue
			}
			checkOneLine(t, tc.name+" "+strings.Join(mode, ""), code, stderr, "cocoonbox: "+tc.want)
			if _, err := os.Stat(filepath.Join(home, ".local")); err == nil {
				t.Errorf("%s: ssh-config wrote the state directory", tc.name)
			}
		}
	}
	if fi, err := os.Stat(big); err != nil || fi.Size() != 5<<20 {
		t.Errorf("the large file changed: %v %v", fi.Size(), err)
	}

	// ~/.ssh/config itself a FIFO, and the pin's file one.
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	cfg := filepath.Join(home, ".ssh", "config")
	if err := os.Mkdir(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := sshConfigRun(t, env)
	checkOneLine(t, "~/.ssh/config", code, stderr, "cocoonbox: "+regexp.QuoteMeta(cfg)+` is a named pipe \(FIFO\), not a regular file`+next)
	kh := filepath.Join(home, ".local", "state", "cocoonbox", "ssh_known_hosts")
	if err := os.MkdirAll(filepath.Dir(kh), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(kh, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr = sshConfigRun(t, env, "--print")
	checkOneLine(t, "known_hosts", code, stderr, "cocoonbox: "+regexp.QuoteMeta(kh)+` is a named pipe \(FIFO\), not a regular file; nothing was changed; remove it, and ssh-config writes the pin there again`)
}

// TestSSHConfigRootOthersLink: run by root on a file another user
// controls, ssh-config follows no link of theirs (planted at the file,
// or at a directory on the way, such as ~/.ssh) to a file of root's:
// one line, exit 1, and root's file is byte for byte as it was. Without
// this, root rewrote the file the link named, and made it readable to
// the link's owner.
func TestSSHConfigRootOthersLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("planting a link of another user needs root (make test runs as root)")
	}
	const other = 65534 // nobody; it need not exist
	dir := t.TempDir()
	rootDir := filepath.Join(dir, "root-ssh")
	if err := os.Mkdir(rootDir, 0o700); err != nil {
		t.Fatal(err)
	}
	standIn := filepath.Join(rootDir, "config")
	want := []byte("# root's own\nHost *\n  IdentityFile /root/.ssh/id_ed25519\n")
	if err := os.WriteFile(standIn, want, 0o640); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(dir, "home")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, other, other); err != nil {
		t.Fatal(err)
	}
	plant := func(link, to string, uid int) {
		t.Helper()
		os.Remove(link)
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(link, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	const advice = `; run by root, ssh-config follows no link that another user controls, so nothing was changed; run it as that user, or give --file the file the link leads to`
	link := filepath.Join(theirs, "config")
	dotSSH := filepath.Join(theirs, ".ssh")
	for _, tc := range []struct {
		name  string
		setup func()
		args  []string
		want  string
	}{
		{"their link", func() { plant(link, standIn, other) }, []string{"--file", link},
			regexp.QuoteMeta(link) + ` is a symbolic link of user 65534` + advice},
		{"root's link in their directory", func() { plant(link, standIn, 0) }, []string{"--file", link},
			regexp.QuoteMeta(link) + ` is a symbolic link in a directory of user 65534` + advice},
		{"their ~/.ssh to root's", func() { plant(dotSSH, rootDir, other) }, nil,
			regexp.QuoteMeta(dotSSH) + ` is a symbolic link of user 65534` + advice},
	} {
		for _, mode := range [][]string{nil, {"--remove"}} {
			tc.setup()
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + theirs, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}
			code, stderr := sshConfigRun(t, env, append(mode, tc.args...)...)
			checkOneLine(t, tc.name+" "+strings.Join(mode, ""), code, stderr, "cocoonbox: "+tc.want)
			if got, err := os.ReadFile(standIn); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: root's file changed: %q %v", tc.name, got, err)
			}
			fi, err := os.Stat(standIn)
			if err != nil {
				t.Fatal(err)
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o640 {
				t.Fatalf("%s: root's file is now %d's, mode %04o", tc.name, st.Uid, fi.Mode().Perm())
			}
			if entries, _ := os.ReadDir(rootDir); len(entries) != 1 {
				t.Errorf("%s: root's directory holds %v", tc.name, entries)
			}
		}
	}
	// The same file, named as it is, is root's to change.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + theirs, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}
	if code, stderr := sshConfigRun(t, env, "--file", standIn); code != 0 {
		t.Errorf("ssh-config --file %s: exit %d\n%s", standIn, code, stderr)
	}
}
