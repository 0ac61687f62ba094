package cli_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/auth"
)

// purgeSetup is a local box served by root with a claims directory of its
// own: its HOME, its state directory, the env its commands run with, the
// prefix of the Unix users it makes, and a runner.
type purgeSetup struct {
	home, state, claims, prefix string
	env                         []string
	run                         func(string, ...string) string
}

func newPurgeSetup(t *testing.T, claims string) purgeSetup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("purge's Unix users and claims need a local box served by root")
	}
	b := make([]byte, 3)
	rand.Read(b)
	prefix := "cp" + hex.EncodeToString(b) + "-"
	t.Cleanup(func() { deleteUsers(prefix) })
	home := shortHome(t)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COCOONBOX_CLAIMS_DIR=" + claims, "COCOONBOX_CONTROL_PERSIST=no",
		// No engine: --orphans looks in none but the tests' own (another
		// test's orphans in the machine's docker are not this one's).
		"DOCKER_HOST=unix://" + filepath.Join(home, "no-engine.sock")}
	return purgeSetup{home, filepath.Join(home, ".local", "state", "cocoonbox", "localbox"), claims, prefix, env, runner(t, env)}
}

// start starts the local box, adds account bob (a Unix user the local box
// makes) and runs a command in bob's box, so that it has one.
func (p purgeSetup) start(t *testing.T) {
	t.Helper()
	p.run("cocoonbox", "localbox", "start", "--user-prefix", p.prefix)
	stopAtCleanup(t, p.env)
	tok := strings.TrimSpace(p.runOut(t, "cocoonbox", "localbox", "account", "add", "bob", "--user-prefix", p.prefix, "--token"))
	bob := append(p.env[:len(p.env):len(p.env)], "COCOONBOX_TOKEN="+tok, "COCOONBOX_ENDPOINT=unix://"+filepath.Join(p.state, "localbox.sock"))
	if out, err := runIn(bob, "cocoonbox", "rsh", "main", "id -un"); err != nil || out != p.prefix+"bob\n" {
		t.Fatalf("bob's box: %v %q", err, out)
	}
}

// runOut is run's stdout alone.
func (p purgeSetup) runOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Env = p.env
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

// purge runs `cocoonbox localbox purge args...` with extra env and
// returns its stderr and exit code (-1 when a signal ended it).
func (p purgeSetup) purge(t *testing.T, extra []string, args ...string) (string, int) {
	t.Helper()
	c := exec.Command("cocoonbox", append([]string{"localbox", "purge"}, args...)...)
	c.Env = append(p.env[:len(p.env):len(p.env)], extra...)
	var stderr strings.Builder
	c.Stderr = &stderr
	err := c.Run()
	if _, ok := errors.AsType[*exec.ExitError](err); err != nil && !ok {
		t.Fatal(err)
	}
	return stderr.String(), c.ProcessState.ExitCode()
}

// madeUsers are the Unix users of /etc/passwd named with prefix.
func madeUsers(prefix string) []string {
	var out []string
	pw, _ := os.ReadFile("/etc/passwd")
	for _, l := range strings.Split(string(pw), "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

// claimsOf are the claims in claims that name state.
func claimsOf(claims, state string) []string {
	var out []string
	ents, _ := os.ReadDir(claims)
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join(claims, e.Name())); err == nil && strings.Contains(string(b), `"state_dir":"`+state+`"`) {
			out = append(out, e.Name())
		}
	}
	return out
}

// markedLive lists the live processes whose environment marks them as
// box processes of the local box at state.
func markedLive(state string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if strings.Contains("\x00"+string(env), "\x00COCOONBOX_LOCALBOX="+state+"\x00") && !strings.Contains(string(st), ") Z ") {
			out = append(out, e.Name())
		}
	}
	return out
}

// purge removes what a local box served by root made: refused while it
// runs (3) and without --yes (4), both changing nothing; then its boxes,
// the processes a kill -9 left behind, the Unix users it made, its claims,
// its state directory and this user's token for it, and nothing that is
// not its own: not the target of a link a box user planted, not the Unix
// user `user` nor its claim by another local box, which keeps serving. A
// second purge finds nothing.
func TestLocalboxPurge(t *testing.T) {
	claims := filepath.Join(t.TempDir(), "claims")
	a := newPurgeSetup(t, claims)
	a.run("cocoonbox", "localbox", "start")
	stopAtCleanup(t, a.env)
	o := newPurgeSetup(t, claims)
	o.start(t)
	owner := o.prefix + "owner_"
	if us := madeUsers(o.prefix); len(us) != 2 || !strings.HasPrefix(us[0], owner) && !strings.HasPrefix(us[1], owner) {
		t.Fatalf("the second local box made %v, want its owner's and bob's users", us)
	}

	// A box user plants links to root's files, and leaves a command
	// running outside its process group.
	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.run("cocoonbox-ssh", "main", "ln -s "+victim+" ~/victim-dir; ln -s "+victim+"/keep victim-file; ln -s "+victim+"/keep ~/.local/victim-file; setsid sleep 600 </dev/null >/dev/null 2>&1 &")

	// Running: refused, nothing changed.
	out, code := o.purge(t, nil, "--yes")
	if code != 3 || !strings.Contains(out, "the local box is running (pid ") || strings.Count(out, "\n") != 1 {
		t.Errorf("purge while it runs: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(o.state); err != nil {
		t.Fatal("purge while it runs removed the state")
	}

	// The server dies as kill -9 has it: its box commands stay.
	syscall.Kill(serverPID(t, o.state), syscall.SIGKILL)
	waitUntil(t, "the server's death", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(serverPID(t, o.state)))
		return err != nil
	})
	if len(markedLive(o.state)) == 0 {
		t.Fatal("no box process left after kill -9")
	}

	out, code = o.purge(t, nil)
	if code != 4 || !strings.Contains(out, "deletes its boxes (main, bob/main) for good") || !strings.Contains(out, "to do it: cocoonbox localbox purge --yes") {
		t.Errorf("purge without --yes: exit %d\n%s", code, out)
	}
	if len(madeUsers(o.prefix)) != 2 {
		t.Fatal("purge without --yes deleted users")
	}

	out, code = o.purge(t, nil, "--yes")
	if code != 0 || !strings.Contains(out, "purged the local box at "+o.state+": boxes deleted: main, bob/main; Unix users deleted: ") {
		t.Fatalf("purge --yes: exit %d\n%s", code, out)
	}
	if us := madeUsers(o.prefix); len(us) != 0 {
		t.Errorf("Unix users left: %v", us)
	}
	if cs := claimsOf(claims, o.state); len(cs) != 0 {
		t.Errorf("claims left: %v", cs)
	}
	if _, err := os.Lstat(o.state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state directory is left: %v", err)
	}
	if ps := markedLive(o.state); len(ps) != 0 {
		t.Errorf("box processes left: %v", ps)
	}
	if b, err := os.ReadFile(filepath.Join(victim, "keep")); err != nil || string(b) != "root's\n" {
		t.Errorf("the link's target: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(victim, "keep")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the link's target was changed: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(o.home, ".config", "cocoonbox", "credentials.json")); strings.Contains(string(b), "cb_") {
		t.Errorf("the token is still saved:\n%s", b)
	}

	// The other local box keeps its user and serves.
	if cs := claimsOf(claims, a.state); len(cs) != 1 || cs[0] != "user" {
		t.Errorf("the other local box's claims: %v", cs)
	}
	if got := a.run("cocoonbox-ssh", "main", "id -un"); got != "user\n" {
		t.Errorf("the other local box: %q", got)
	}

	out, code = o.purge(t, nil, "--yes")
	if code != 0 || !strings.HasPrefix(out, "nothing to purge: ") {
		t.Errorf("a second purge: exit %d\n%s", code, out)
	}
}

// A purge killed at each of its steps leaves what the next one clears.
func TestLocalboxPurgeKilled(t *testing.T) {
	for _, step := range []string{"client", "procs", "boxes", "users", "claims", "state"} {
		t.Run(step, func(t *testing.T) {
			claims := filepath.Join(t.TempDir(), "claims")
			p := newPurgeSetup(t, claims)
			p.start(t)
			p.run("cocoonbox", "localbox", "stop")
			if _, code := p.purge(t, []string{"COCOONBOX_TEST_KILL_AT=purge:" + step}, "--yes"); code != -1 {
				t.Fatalf("the purge killed at %s exited %d", step, code)
			}
			if out, code := p.purge(t, nil, "--yes"); code != 0 {
				t.Fatalf("the purge after: exit %d\n%s", code, out)
			}
			if us := madeUsers(p.prefix); len(us) != 0 {
				t.Errorf("Unix users left: %v", us)
			}
			if cs := claimsOf(claims, p.state); len(cs) != 0 {
				t.Errorf("claims left: %v", cs)
			}
			if _, err := os.Lstat(p.state); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the state directory is left: %v", err)
			}
			if out, code := p.purge(t, nil, "--yes"); code != 0 || !strings.HasPrefix(out, "nothing to purge: ") {
				t.Errorf("a third purge: exit %d\n%s", code, out)
			}
		})
	}
}

// Root removes nothing of the state directory that is not root's: a file
// a box user owns there stops the purge, and stays.
func TestLocalboxPurgeLeavesOthersFiles(t *testing.T) {
	claims := filepath.Join(t.TempDir(), "claims")
	p := newPurgeSetup(t, claims)
	p.start(t)
	p.run("cocoonbox", "localbox", "stop")
	u, err := user.Lookup("user")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	planted := filepath.Join(p.state, "tls", "planted")
	os.MkdirAll(filepath.Dir(planted), 0o700)
	if err := os.WriteFile(planted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(planted, uid, uid)
	out, code := p.purge(t, nil, "--yes")
	if code != 1 || !strings.Contains(out, planted+" is uid "+u.Uid+"'s, not the local box's") {
		t.Errorf("purge: exit %d\n%s", code, out)
	}
	if _, err := os.Lstat(planted); err != nil {
		t.Errorf("the box user's file: %v", err)
	}
}

// The reported case: a local box's state directory removed by hand
// leaves its Unix users and claims; purge --orphans removes them, and
// nothing of a local box that still has its state.
func TestLocalboxPurgeOrphans(t *testing.T) {
	claims := filepath.Join(t.TempDir(), "claims")
	a := newPurgeSetup(t, claims)
	a.run("cocoonbox", "localbox", "start")
	stopAtCleanup(t, a.env)
	o := newPurgeSetup(t, claims)
	o.start(t)
	o.run("cocoonbox", "localbox", "stop")
	if err := os.RemoveAll(o.state); err != nil {
		t.Fatal(err)
	}
	if len(madeUsers(o.prefix)) != 2 || len(claimsOf(claims, o.state)) != 2 {
		t.Fatalf("before: users %v, claims %v", madeUsers(o.prefix), claimsOf(claims, o.state))
	}
	out, code := a.purge(t, nil, "--orphans")
	if code != 4 || !strings.Contains(out, "deletes the Unix users it made ("+o.prefix+"bob, "+o.prefix+"owner_") || !strings.Contains(out, "to do it: cocoonbox localbox purge --orphans --yes") {
		t.Errorf("--orphans without --yes: exit %d\n%s", code, out)
	}
	out, code = a.purge(t, nil, "--orphans", "--yes")
	if code != 0 || !strings.HasPrefix(out, "purged the orphans: Unix users deleted: ") {
		t.Errorf("--orphans --yes: exit %d\n%s", code, out)
	}
	if us := madeUsers(o.prefix); len(us) != 0 {
		t.Errorf("Unix users left: %v", us)
	}
	if cs := claimsOf(claims, o.state); len(cs) != 0 {
		t.Errorf("claims left: %v", cs)
	}
	if cs := claimsOf(claims, a.state); len(cs) != 1 {
		t.Errorf("the live local box's claims: %v", cs)
	}
	if got := a.run("cocoonbox-ssh", "main", "id -un"); got != "user\n" {
		t.Errorf("the live local box: %q", got)
	}
	out, code = a.purge(t, nil, "--orphans", "--yes")
	if code != 0 || !strings.HasPrefix(out, "no local box whose state is gone") {
		t.Errorf("a second --orphans: exit %d\n%s", code, out)
	}
}

// An engine whose socket is there but does not answer (docker stopped,
// or uninstalled leaving its socket) stops purge --orphans in one line
// with the ways on: the orphans it holds are not known.
func TestLocalboxPurgeOrphansEngineDown(t *testing.T) {
	a := newPurgeSetup(t, filepath.Join(t.TempDir(), "claims"))
	sock := filepath.Join(a.home, "stale.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	out, code := a.purge(t, []string{"DOCKER_HOST=unix://" + sock}, "--orphans", "--yes")
	want := "cocoonbox: engine docker does not answer at unix://" + sock + ", so its orphans are not known: start it (systemctl start docker) and purge again, or, if it is uninstalled, remove that socket\n"
	if code != 1 || out != want {
		t.Errorf("--orphans with docker down: exit %d\n%s\nwant exit 1\n%s", code, out, want)
	}
}

// What `localbox start` saved for its local box goes with it: the token,
// the current endpoint and the self-signed certificate pinned for it.
// Another endpoint's token stays.
func TestLocalboxPurgeForgetsEndpoint(t *testing.T) {
	p := newPurgeSetup(t, filepath.Join(t.TempDir(), "claims"))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	p.run("cocoonbox", "localbox", "start", "--listen", addr, "--tls", "self-signed")
	stopAtCleanup(t, p.env)
	cfg := filepath.Join(p.home, ".config", "cocoonbox")
	pin := filepath.Join(cfg, "ca", strings.ReplaceAll(addr, ":", "_")+".pem")
	if _, err := os.Stat(pin); err != nil {
		t.Fatalf("start pinned nothing: %v", err)
	}
	// Another local box's token, saved as start saves one.
	store := auth.FileStore{Dir: cfg}
	if err := store.Put("http://127.0.0.1:1", auth.Credential{Token: "cb_" + strings.Repeat("ab", 32), Source: auth.SourceLocalbox}); err != nil {
		t.Fatal(err)
	}
	p.run("cocoonbox", "localbox", "stop")
	if out, code := p.purge(t, nil, "--yes"); code != 0 || !strings.Contains(out, "forgot the saved endpoint https://"+addr) {
		t.Fatalf("purge: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(pin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pinned certificate stays: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(cfg, "config.json")); strings.Contains(string(b), addr) {
		t.Errorf("config.json still names it:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(cfg, "credentials.json")); strings.Contains(string(b), addr) {
		t.Errorf("credentials.json still has it:\n%s", b)
	}
	if _, err := store.Get("http://127.0.0.1:1"); err != nil {
		t.Errorf("another local box's token is gone: %v", err)
	}
}

// Not served by root, a local box made no Unix user and no claim: purge
// ends what a kill -9 of it left, removes its boxes and state, and
// --orphans is refused (exit 3).
func TestLocalboxPurgeNotRoot(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "COCOONBOX_CONTROL_PERSIST=no", "COCOONBOX_CLAIMS_DIR=" + filepath.Join(t.TempDir(), "claims")}
	var cred *syscall.Credential
	home := shortHome(t)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("user")
		if err != nil {
			t.Fatalf("%v (scripts/deps.sh test makes the account)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(home, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	env = append(env, "HOME="+home)
	state := filepath.Join(home, ".local", "state", "cocoonbox", "localbox")
	cmd := func(args ...string) *exec.Cmd {
		c := exec.Command(args[0], args[1:]...)
		c.Env = env
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return c
	}
	run := func(args ...string) (string, int) {
		t.Helper()
		out, err := cmd(args...).CombinedOutput()
		if _, ok := errors.AsType[*exec.ExitError](err); err != nil && !ok {
			t.Fatal(err)
		}
		code := 0
		if err != nil {
			code = err.(*exec.ExitError).ExitCode()
		}
		return string(out), code
	}
	t.Cleanup(func() { cmd("cocoonbox", "localbox", "stop").Run() })
	if out, code := run("cocoonbox", "localbox", "start"); code != 0 {
		t.Fatalf("start: %s", out)
	}
	run("cocoonbox-ssh", "main", "setsid sleep 600 </dev/null >/dev/null 2>&1 &")
	syscall.Kill(serverPID(t, state), syscall.SIGKILL)
	waitUntil(t, "the server's death", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(serverPID(t, state)))
		return err != nil
	})
	if len(markedLive(state)) == 0 {
		t.Fatal("no box process left after kill -9")
	}
	if out, code := run("cocoonbox", "localbox", "purge", "--orphans", "--yes"); code != 3 || !strings.Contains(out, "purge --orphans needs root") {
		t.Errorf("--orphans: exit %d\n%s", code, out)
	}
	out, code := run("cocoonbox", "localbox", "purge", "--yes")
	if code != 0 || !strings.Contains(out, "purged the local box at "+state+": boxes deleted: main; forgot the saved endpoint unix://") {
		t.Errorf("purge: exit %d\n%s", code, out)
	}
	if ps := markedLive(state); len(ps) != 0 {
		t.Errorf("box processes left: %v", ps)
	}
	if _, err := os.Lstat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state directory is left: %v", err)
	}
}
