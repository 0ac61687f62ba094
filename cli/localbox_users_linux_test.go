package cli_test

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// Two local boxes served by root on one machine, running at once, never
// share a uid: the first's owner gets the box user `user`, as before
// accounts; the second's a Unix user made for it (--user-prefix, then
// owner_ and a hash of its state directory), which start and status name
// in one line. A command in either box reads neither the other's 0600
// workspace file nor its processes' environment, and one's devices are
// not the other's to list or revoke.
func TestTwoLocalboxesApart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("two Unix users need a local box served by root")
	}
	claims := filepath.Join(t.TempDir(), "claims")
	b := make([]byte, 3)
	rand.Read(b)
	prefix := "cb" + hex.EncodeToString(b) + "-"
	t.Cleanup(func() { deleteUsers(prefix) })
	type side struct {
		home, state string
		env         []string
		run         func(string, ...string) string
	}
	var sides [2]side
	for i := range sides {
		home := shortHome(t)
		env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COCOONBOX_CLAIMS_DIR=" + claims, "COCOONBOX_CONTROL_PERSIST=no"}
		sides[i] = side{home, filepath.Join(home, ".local", "state", "cocoonbox", "localbox"), env, runner(t, env)}
	}
	a, o := sides[0], sides[1]
	if out := a.run("cocoonbox", "localbox", "start", "--user-prefix", prefix); !strings.Contains(out, "box commands run as the Unix user `user`\n") {
		t.Errorf("the first start:\n%s", out)
	}
	stopAtCleanup(t, a.env)
	out := o.run("cocoonbox", "localbox", "start", "--user-prefix", prefix)
	stopAtCleanup(t, o.env)
	line := regexp.MustCompile("(?m)^box commands run as the Unix user `(" + prefix + "owner_[0-9a-f]{8})`, made for this local box \\(the Unix user `user` is the owner's of the local box at " + regexp.QuoteMeta(a.state) + "\\)$")
	m := line.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the second start does not name a user of its own:\n%s", out)
	}
	if status := o.run("cocoonbox", "localbox", "status"); !line.MatchString(status) {
		t.Errorf("the second's status:\n%s", status)
	}
	if who := o.run("cocoonbox-ssh", "main", "id -un"); who != m[1]+"\n" {
		t.Errorf("the second's box commands run as %q, want %s", who, m[1])
	}
	uids := [2]string{a.run("cocoonbox-ssh", "main", "id -u"), o.run("cocoonbox-ssh", "main", "id -u")}
	if uids[0] == uids[1] || uids[0] == "0\n" || uids[1] == "0\n" {
		t.Fatalf("the two local boxes run box commands as uids %q: want two, neither root", uids)
	}

	for i, s := range sides {
		other := sides[1-i]
		s.run("cocoonbox-ssh", "main", "umask 077; echo secret-"+uids[i]+" > secret")
		secret := filepath.Join(s.state, "boxes", "main", "workspace", "secret")
		if got, err := runIn(other.env, "cocoonbox-ssh", "main", "cat "+secret); err == nil || strings.Contains(got, "secret-") {
			t.Errorf("box %d read box %d's 0600 workspace file: %v %q", 1-i, i, err, got)
		}

		// A command that keeps running with a secret in its environment.
		cmd := exec.Command("cocoonbox-ssh", "main", "echo $$; exec env SECRET_ENV=env-secret-"+strings.TrimSpace(uids[i])+" sleep 600")
		cmd.Env = s.env
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pid, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		pid = strings.TrimSpace(pid)
		waitUntil(t, "the command's exec of sleep", func() bool {
			env, _ := os.ReadFile("/proc/" + pid + "/environ")
			return strings.Contains(string(env), "env-secret-")
		})
		if got, err := runIn(other.env, "cocoonbox-ssh", "main", "cat /proc/"+pid+"/environ"); err == nil || strings.Contains(got, "env-secret-") {
			t.Errorf("box %d read the environment of box %d's process: %v %q", 1-i, i, err, got)
		}

		// Devices: the other's is not listed, and not revoked.
		dev := regexp.MustCompile(`dev_[0-9a-f]{16}`).FindString(s.run("cocoonbox", "devices"))
		if dev == "" {
			t.Fatal("no device listed")
		}
		if got := other.run("cocoonbox", "devices"); strings.Contains(got, dev) {
			t.Errorf("box %d lists box %d's device %s:\n%s", 1-i, i, dev, got)
		}
		if got, err := runIn(other.env, "cocoonbox", "devices", "revoke", dev); err == nil {
			t.Errorf("box %d revoked box %d's device: %s", 1-i, i, got)
		}
		if got := s.run("cocoonbox", "devices"); !strings.Contains(got, dev) {
			t.Errorf("box %d's device %s is gone after the other's revoke:\n%s", i, dev, got)
		}
	}
}

// runIn runs name with env and returns its combined output and error.
func runIn(env []string, name string, args ...string) (string, error) {
	c := exec.Command(name, args...)
	c.Env = env
	out, err := c.CombinedOutput()
	return string(out), err
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("waited 10 s for %s", what)
}

// boxUserCred is the credential of the box user `user`, which
// scripts/deps.sh makes, for a command run as it from a test run by root.
func boxUserCred(t *testing.T) *syscall.Credential {
	t.Helper()
	u, err := user.Lookup(localbox.DefaultUser)
	if err != nil {
		t.Fatalf("%v (scripts/deps.sh test makes the account)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// A local box not served by root keeps one account, its user's: start and
// status say so in one line, with the user box commands run as. Run as
// root, the test serves as the box user `user` (scripts/deps.sh makes it).
func TestLocalboxNotRootSaysOneAccount(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "COCOONBOX_CONTROL_PERSIST=no"}
	var cred *syscall.Credential
	name := ""
	if os.Geteuid() == 0 {
		cred = boxUserCred(t)
		name = localbox.DefaultUser
	} else if me, err := user.Current(); err == nil {
		name = me.Username
	}
	home := shortHome(t)
	if cred != nil {
		if err := os.Chown(home, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	env = append(env, "HOME="+home)
	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(args[0], args[1:]...)
		c.Env = env
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		c := exec.Command("cocoonbox", "localbox", "stop")
		c.Env = env
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		c.Run()
	})
	line := "box commands run as the Unix user `" + name + "`, who serves the local box: one account, the owner's (accounts need a local box served by root)\n"
	if out := run("cocoonbox", "localbox", "start"); !strings.Contains(out, "\n"+line) {
		t.Errorf("start does not say it keeps one account:\n%s", out)
	}
	if out := run("cocoonbox", "localbox", "status"); !strings.Contains(out, "\n"+line) {
		t.Errorf("status does not say it keeps one account:\n%s", out)
	}
	if out := run("cocoonbox", "rsh", "main", "id -un"); out != name+"\n" {
		t.Errorf("box commands run as %q, want %s", out, name)
	}
}
