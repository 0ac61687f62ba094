package localbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// rootState is a state directory the Unix users of accounts can reach
// (0711 on the way down), and a claims directory of the test's own, so
// that tests in parallel claim nothing of each other's; its users are
// named with prefix, random per test, and deleted when the test ends.
func rootState(t *testing.T) (dir, claims, prefix string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("accounts need a local box served by root (their Unix users)")
	}
	top := t.TempDir()
	for _, d := range []string{filepath.Dir(top), top} {
		os.Chmod(d, 0o711)
	}
	dir = filepath.Join(top, "state")
	claims = filepath.Join(top, "claims")
	b := make([]byte, 3)
	rand.Read(b)
	prefix = "cbt" + hex.EncodeToString(b) + "-"
	t.Cleanup(func() {
		// A test that failed half-way leaves users; delete every one of
		// its prefix.
		pw, _ := os.ReadFile("/etc/passwd")
		for _, l := range strings.Split(string(pw), "\n") {
			if name, _, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(name, prefix) {
				exec.Command("pkill", "-KILL", "-u", name).Run()
				exec.Command("userdel", name).Run()
			}
		}
	})
	return dir, claims, prefix
}

// serveDir serves the state in dir on loopback TCP until the test ends.
func serveDir(t *testing.T, dir string) (string, *localbox.Server) {
	t.Helper()
	lis, u, err := localbox.Listen(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &localbox.Server{Dir: dir, Logf: t.Logf}
	if err := srv.CreateBox(localbox.DefaultBox); err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return u, srv
}

func addAccount(t *testing.T, dir, claims, prefix, name string) (localbox.AddedAccount, string) {
	t.Helper()
	a, err := localbox.AddAccount(dir, name, localbox.AddAccountOptions{UserPrefix: prefix, ClaimsDir: claims, Token: true})
	if err != nil {
		t.Fatalf("add account %s: %v", name, err)
	}
	return a, a.Token
}

// exec runs line in boxName and returns its stdout, stderr and status.
func execIn(c *box.Client, boxName, line string) (string, string, int, error) {
	var out, errb bytes.Buffer
	st, err := c.Exec(context.Background(), &box.Command{Box: boxName, Line: line, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), st.Code, err
}

// Two accounts of one server: each token reaches only its own account's
// boxes (by name and by id) and devices; only the owner revokes another
// account's device. Their box commands run as two Unix users of their
// own, neither root, and neither reads the other's 0600 workspace file
// nor its process's environment. Removing an account ends its commands,
// revokes its tokens, removes its boxes and deletes the user it made.
func TestAccountsApart(t *testing.T) {
	dir, claims, prefix := rootState(t)
	if err := localbox.MkdirState(dir); err != nil {
		t.Fatal(err)
	}
	base, srv := serveDir(t, dir)
	ownerTok, err := localbox.IssueToken(dir, "owner laptop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	owner := dial(t, base, ownerTok)
	alice, aliceTok := addAccount(t, dir, claims, prefix, "alice")
	_, bobTok := addAccount(t, dir, claims, prefix, "bob")
	if alice.Account.UnixUser != prefix+"alice" || !alice.Account.Created {
		t.Fatalf("alice's account = %+v", alice.Account)
	}
	a, b := dial(t, base, aliceTok), dial(t, base, bobTok)

	// Boxes: each has its own main, and bob's box is not alice's to see.
	if _, err := b.Create(t.Context(), "bobs", ""); err != nil {
		t.Fatal(err)
	}
	bobBoxes, _ := b.List(t.Context())
	aliceBoxes, _ := a.List(t.Context())
	if len(aliceBoxes) != 1 || aliceBoxes[0].Name != "main" || len(bobBoxes) != 2 {
		t.Fatalf("alice lists %+v, bob %+v", aliceBoxes, bobBoxes)
	}
	for _, ref := range []string{"bobs", bobBoxes[0].ID, bobBoxes[1].ID} {
		if _, _, _, err := execIn(a, ref, "true"); !errors.Is(err, box.ErrNotFound) {
			t.Errorf("alice's Exec in bob's %s: %v, want NOT_FOUND", ref, err)
		}
		if _, err := a.Hibernate(t.Context(), ref); !errors.Is(err, box.ErrNotFound) {
			t.Errorf("alice's Hibernate of bob's %s: %v, want NOT_FOUND", ref, err)
		}
		if _, err := a.Delete(t.Context(), ref); !errors.Is(err, box.ErrNotFound) {
			t.Errorf("alice's Delete of bob's %s: %v, want NOT_FOUND", ref, err)
		}
	}
	ownerBoxes, _ := owner.List(t.Context())
	if len(ownerBoxes) != 1 || ownerBoxes[0].ID == aliceBoxes[0].ID {
		t.Errorf("the owner lists %+v", ownerBoxes)
	}

	// Unix users: two of their own, and each one's files and processes
	// closed to the other.
	aid, _, _, _ := execIn(a, "main", "id -u")
	bid, _, _, _ := execIn(b, "main", "id -u")
	if aid == bid || strings.TrimSpace(aid) == "0" || strings.TrimSpace(bid) == "0" || aid == "" {
		t.Fatalf("alice runs as uid %q, bob as %q: want two uids, neither root", aid, bid)
	}
	if want, _ := user.Lookup(prefix + "alice"); want == nil || strings.TrimSpace(aid) != want.Uid {
		t.Errorf("alice runs as uid %q, want %s's", aid, prefix+"alice")
	}
	if _, stderr, code, _ := execIn(a, "main", "umask 077; echo alice-secret > secret; chmod 600 secret"); code != 0 {
		t.Fatalf("write the secret: %s", stderr)
	}
	secret := filepath.Join(dir, "accounts", "alice", "boxes", "main", "workspace", "secret")
	if out, _, code, _ := execIn(b, "main", "cat "+secret); code == 0 || strings.Contains(out, "alice-secret") {
		t.Errorf("bob read alice's 0600 workspace file: %q", out)
	}
	for _, d := range []string{filepath.Join(dir, "accounts"), filepath.Join(dir, "accounts", "alice"), filepath.Join(dir, "accounts", "alice", "boxes"), filepath.Join(dir, "accounts", "alice", "boxes", "main")} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v %v, want 0711", d, fi.Mode().Perm(), err)
		}
	}
	if out, _, code, _ := execIn(b, "main", "ls "+filepath.Join(dir, "accounts")); code == 0 {
		t.Errorf("bob listed the accounts: %q", out)
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	pids := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := a.Exec(context.Background(), &box.Command{Box: "main", Line: "echo $$; exec sleep 600", Env: map[string]string{"ALICE_KEY": "alice-env-secret"}, Stdin: pr, Stdout: firstWrite(pids), Stderr: io.Discard})
		done <- err
	}()
	pid := strings.TrimSpace(<-pids)
	time.Sleep(100 * time.Millisecond) // the exec of sleep
	if env, err := os.ReadFile("/proc/" + pid + "/environ"); err != nil || !bytes.Contains(env, []byte("alice-env-secret")) {
		t.Fatalf("alice's sleep (pid %s) has no ALICE_KEY: %v", pid, err)
	}
	if out, _, code, _ := execIn(b, "main", "cat /proc/"+pid+"/environ"); code == 0 || strings.Contains(out, "alice-env-secret") {
		t.Errorf("bob read the environment of alice's process: %q", out)
	}

	// Devices: each lists its own; alice cannot revoke bob's, the owner can.
	adevs, _ := a.ListDevices(t.Context())
	bdevs, _ := b.ListDevices(t.Context())
	odevs, _ := owner.ListDevices(t.Context())
	if len(adevs) != 1 || len(bdevs) != 1 || !adevs[0].Current || len(odevs) != 1 || odevs[0].Name != "owner laptop" {
		t.Fatalf("devices: alice %+v, bob %+v, owner %+v", adevs, bdevs, odevs)
	}
	if err := a.RevokeDevice(t.Context(), bdevs[0].ID); !errors.Is(err, box.ErrNotFound) {
		t.Errorf("alice revoking bob's device: %v, want NOT_FOUND", err)
	}
	if err := a.RevokeDevice(t.Context(), odevs[0].ID); !errors.Is(err, box.ErrNotFound) {
		t.Errorf("alice revoking the owner's device: %v, want NOT_FOUND", err)
	}
	if n, err := b.SignOutEverywhere(t.Context()); err != nil || n != 1 {
		t.Errorf("bob signs out everywhere: %d, %v; want his 1 token", n, err)
	}
	if _, err := a.List(t.Context()); err != nil {
		t.Errorf("bob's sign-out everywhere signed alice out: %v", err)
	}
	if _, err := owner.List(t.Context()); err != nil {
		t.Errorf("bob's sign-out everywhere signed the owner out: %v", err)
	}
	a2, err := localbox.AddAccount(dir, "carol", localbox.AddAccountOptions{UserPrefix: prefix, ClaimsDir: claims, Token: true})
	if err != nil {
		t.Fatal(err)
	}
	cdevs, _ := dial(t, base, a2.Token).ListDevices(t.Context())
	if err := owner.RevokeDevice(t.Context(), cdevs[0].ID); err != nil {
		t.Errorf("the owner revoking carol's device: %v", err)
	}
	if _, err := dial(t, base, a2.Token).List(t.Context()); !errors.Is(err, box.ErrUnauthenticated) {
		t.Errorf("carol's revoked token: %v", err)
	}

	// Removing alice: her open command ends, her token stops, her boxes
	// and her user are gone.
	rm, err := localbox.RemoveAccount(dir, "alice", localbox.RemoveAccountOptions{ClaimsDir: claims, Reload: func() { srv.Reload() }})
	if err != nil || rm.Tokens != 1 || !rm.UserDeleted || len(rm.Boxes) != 1 {
		t.Fatalf("RemoveAccount = %+v, %v", rm, err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("alice's command outlived her account")
	}
	if _, err := a.List(t.Context()); !errors.Is(err, box.ErrUnauthenticated) {
		t.Errorf("alice's token after the removal: %v", err)
	}
	if _, err := user.Lookup(prefix + "alice"); err == nil {
		t.Errorf("alice's unix user outlived her account")
	}
	if _, err := os.Lstat(filepath.Join(dir, "accounts", "alice")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alice's boxes outlived her account: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(claims, prefix+"alice")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alice's claim outlived her account: %v", err)
	}
	localbox.RemoveAccount(dir, "bob", localbox.RemoveAccountOptions{ClaimsDir: claims})
	localbox.RemoveAccount(dir, "carol", localbox.RemoveAccountOptions{ClaimsDir: claims})
}

// Two local boxes on one machine never share a uid: the second cannot
// map the first's account user (the claim says whose it is, in one line
// with the next step), nor take a user the first one made under the same
// default name, nor a user of another name with the same uid; with a
// prefix of its own it gets a uid of its own.
func TestAccountClaims(t *testing.T) {
	dir1, claims, prefix := rootState(t)
	dir2 := filepath.Join(filepath.Dir(dir1), "state2")
	for _, d := range []string{dir1, dir2} {
		if err := localbox.MkdirState(d); err != nil {
			t.Fatal(err)
		}
	}
	a1, err := localbox.AddAccount(dir1, "alice", localbox.AddAccountOptions{UserPrefix: prefix, ClaimsDir: claims})
	if err != nil {
		t.Fatal(err)
	}
	if len(a1.Code) != 11 || a1.Code[5] != '-' {
		t.Errorf("sign-in code %q, want XXXXX-XXXXX", a1.Code)
	}
	_, err = localbox.AddAccount(dir2, "al", localbox.AddAccountOptions{UnixUser: prefix + "alice", ClaimsDir: claims})
	if err == nil || !strings.Contains(err.Error(), "unix user "+prefix+"alice belongs to the local box at "+dir1+" (account alice); map another existing Unix user with --unix-user NAME, or leave out --unix-user: the local box makes cocoonbox-al, or Pal with --user-prefix P") {
		t.Errorf("mapping the other local box's user: %v", err)
	}
	// The name the local box would make is taken: the way out is another
	// prefix, not --unix-user, whose refusal would send back here.
	_, err = localbox.AddAccount(dir2, "alice", localbox.AddAccountOptions{UserPrefix: prefix, ClaimsDir: claims})
	if err == nil || !strings.Contains(err.Error(), "belongs to the local box at "+dir1+" (account alice); choose another prefix with --user-prefix P (the local box makes Palice instead), or map an existing Unix user with --unix-user NAME") {
		t.Errorf("the same default name on another local box: %v", err)
	}
	// The same uid under another name.
	u1, _ := user.Lookup(prefix + "alice")
	twin := prefix + "twin"
	if out, err := exec.Command("useradd", "-M", "-o", "-u", u1.Uid, "-s", "/usr/sbin/nologin", twin).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v %s", twin, err, out)
	}
	_, err = localbox.AddAccount(dir2, "twin", localbox.AddAccountOptions{UnixUser: twin, ClaimsDir: claims})
	if err == nil || !strings.Contains(err.Error(), "has uid "+u1.Uid+", as unix user "+prefix+"alice of the local box at "+dir1) {
		t.Errorf("a user sharing the uid: %v", err)
	}
	// Root, and a user that is not there.
	if _, err := localbox.AddAccount(dir2, "r", localbox.AddAccountOptions{UnixUser: "root", ClaimsDir: claims}); err == nil || !strings.Contains(err.Error(), "never root") {
		t.Errorf("mapping root: %v", err)
	}
	if _, err := localbox.AddAccount(dir2, "n", localbox.AddAccountOptions{UnixUser: prefix + "none", ClaimsDir: claims}); err == nil || !strings.Contains(err.Error(), "no unix user "+prefix+"none; create it (useradd -M -s /usr/sbin/nologin "+prefix+"none), or leave out --unix-user: the local box makes cocoonbox-n, or Pn with --user-prefix P") {
		t.Errorf("mapping a missing user: %v", err)
	}
	other := prefix[:len(prefix)-1] + "b-"
	t.Cleanup(func() { exec.Command("userdel", other+"alice").Run() })
	a2, err := localbox.AddAccount(dir2, "alice", localbox.AddAccountOptions{UserPrefix: other, ClaimsDir: claims})
	if err != nil {
		t.Fatal(err)
	}
	if a2.Account.UID == a1.Account.UID {
		t.Errorf("two local boxes' accounts share uid %d", a1.Account.UID)
	}
	// The owner's box user, once one local box claims it, is not another's.
	own := prefix + "own"
	if out, err := exec.Command("useradd", "-M", "-s", "/usr/sbin/nologin", own).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v %s", own, err, out)
	}
	if err := localbox.ClaimOwnerUser(claims, dir1, own); err != nil {
		t.Errorf("claim %s for the first local box's owner: %v", own, err)
	}
	if err := localbox.ClaimOwnerUser(claims, dir1, own); err != nil {
		t.Errorf("claim %s again for the same owner: %v", own, err)
	}
	if err := localbox.ClaimOwnerUser(claims, dir2, own); err == nil || !strings.Contains(err.Error(), "belongs to the local box at "+dir1+" (account owner)") {
		t.Errorf("the second local box's owner takes the first one's box user: %v", err)
	}
	for _, c := range []struct{ dir, name string }{{dir1, "alice"}, {dir2, "alice"}} {
		if _, err := localbox.RemoveAccount(c.dir, c.name, localbox.RemoveAccountOptions{ClaimsDir: claims}); err != nil {
			t.Errorf("remove %s of %s: %v", c.name, c.dir, err)
		}
	}
}

// A removed account's uid and gid are never a later account's: useradd
// hands out the highest uid plus one, so without the retired ids the next
// account would own what the removed one left outside the state
// directory, a setuid copy of a shell in /tmp among it, which any other
// account could run to become the new one.
func TestAccountUIDNotReused(t *testing.T) {
	dir, claims, prefix := rootState(t)
	if err := localbox.MkdirState(dir); err != nil {
		t.Fatal(err)
	}
	a, _ := addAccount(t, dir, claims, prefix, "gone")
	u, err := user.Lookup(prefix + "gone")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := localbox.RemoveAccount(dir, "gone", localbox.RemoveAccountOptions{ClaimsDir: claims}); err != nil {
		t.Fatal(err)
	}
	b, _ := addAccount(t, dir, claims, prefix, "next")
	nu, err := user.Lookup(prefix + "next")
	if err != nil {
		t.Fatal(err)
	}
	if b.Account.UID == a.Account.UID || nu.Gid == u.Gid {
		t.Errorf("account next has uid %s gid %s, as removed account gone had (uid %s gid %s)", nu.Uid, nu.Gid, u.Uid, u.Gid)
	}
	// Nor is the uid of an account whose user someone deleted by hand.
	if out, err := exec.Command("userdel", prefix+"next").CombinedOutput(); err != nil {
		t.Fatalf("userdel: %v %s", err, out)
	}
	if _, err := localbox.RemoveAccount(dir, "next", localbox.RemoveAccountOptions{ClaimsDir: claims}); err != nil {
		t.Fatal(err)
	}
	if c, _ := addAccount(t, dir, claims, prefix, "third"); c.Account.UID == b.Account.UID {
		t.Errorf("account third has uid %d, as removed account next had, whose user was deleted by hand", c.Account.UID)
	}
	// A user made by hand with the removed account's uid is not mapped.
	twin := prefix + "twin"
	if out, err := exec.Command("useradd", "-M", "-o", "-u", u.Uid, "-s", "/usr/sbin/nologin", twin).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v %s", twin, err, out)
	}
	if _, err := localbox.AddAccount(dir, "twin", localbox.AddAccountOptions{UnixUser: twin, ClaimsDir: claims}); err == nil || !strings.Contains(err.Error(), "was a removed account's") {
		t.Errorf("mapping a user with a removed account's uid: %v", err)
	}
}

// An account's sign-in code signs its person in to that account: the
// device the browser sign-in gives lists under it, not the owner's, and
// the code works once.
func TestAccountSignIn(t *testing.T) {
	dir, claims, prefix := rootState(t)
	if err := localbox.MkdirState(dir); err != nil {
		t.Fatal(err)
	}
	base, _ := serveDir(t, dir)
	a, err := localbox.AddAccount(dir, "dana", localbox.AddAccountOptions{UserPrefix: prefix, ClaimsDir: claims})
	if err != nil {
		t.Fatal(err)
	}
	st, m := call(t, base, "/cb/api/session", "", map[string]string{"code": a.Code})
	if st != http.StatusOK {
		t.Fatalf("sign in with dana's code: %d %v", st, m)
	}
	tok, err := login(t, base, m["session"].(string), "dana's laptop", "approve")
	if err != nil {
		t.Fatal(err)
	}
	devs, err := dial(t, base, tok).ListDevices(t.Context())
	if err != nil || len(devs) != 1 || devs[0].Name != "dana's laptop" {
		t.Errorf("dana's devices = %+v, %v", devs, err)
	}
	out, _, _, _ := execIn(dial(t, base, tok), "main", "id -un")
	if strings.TrimSpace(out) != prefix+"dana" {
		t.Errorf("dana's box runs as %q", out)
	}
	if st, _ := call(t, base, "/cb/api/session", "", map[string]string{"code": a.Code}); st == http.StatusOK {
		t.Errorf("dana's code worked twice")
	}
	owner, _ := localbox.IssueToken(dir, "o", "cli")
	if odevs, _ := dial(t, base, owner).ListDevices(t.Context()); len(odevs) != 1 {
		t.Errorf("the owner's devices = %+v, want its own one", odevs)
	}
	localbox.RemoveAccount(dir, "dana", localbox.RemoveAccountOptions{ClaimsDir: claims})
}

// firstWrite sends what its first write carries on c.
type firstWrite chan string

func (f firstWrite) Write(p []byte) (int, error) {
	select {
	case f <- string(p):
	default:
	}
	return len(p), nil
}

// An account whose Unix user was deleted by hand: RemoveAccount skipped
// its processes, which kept running under the old uid, and removed its
// boxes with rm -rf as root. Now every process of the recorded uid ends,
// and the files are removed as that uid: a directory of root's in the
// workspace (a stand-in for what a setuid program or a mount leaves
// there) is not root's rm's to remove, and the error names it. When
// another user has the uid by then, only the processes that carry the
// local box's marker are the account's.
func TestRemoveAccountUserGone(t *testing.T) {
	dir, claims, prefix := rootState(t)
	if err := localbox.MkdirState(dir); err != nil {
		t.Fatal(err)
	}
	gone, _ := addAccount(t, dir, claims, prefix, "gone")
	taken, _ := addAccount(t, dir, claims, prefix, "taken")
	srv := &localbox.Server{Dir: dir, Logf: t.Logf}
	if err := srv.CreateBox(localbox.DefaultBox); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for _, n := range []string{"gone", "taken"} {
		if out, err := exec.Command("userdel", prefix+n).CombinedOutput(); err != nil {
			t.Fatalf("userdel: %v %s", err, out)
		}
	}
	twin := prefix + "twin"
	if out, err := exec.Command("useradd", "-M", "-o", "-u", strconv.Itoa(int(taken.Account.UID)), "-s", "/usr/sbin/nologin", twin).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v %s", twin, err, out)
	}
	// sleepAs runs sleep as uid, with env, until the test ends.
	sleepAs := func(uid uint32, env ...string) *exec.Cmd {
		cmd := exec.Command("sleep", "600")
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	ended := func(cmd *exec.Cmd) bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
			if err != nil || strings.Contains(string(b), ") Z ") {
				return true
			}
		}
		return false
	}
	goneProc := sleepAs(gone.Account.UID)
	marked := sleepAs(taken.Account.UID, "COCOONBOX_LOCALBOX="+dir)
	twins := sleepAs(taken.Account.UID)

	ws := filepath.Join(dir, "accounts", "gone", "boxes", "main", "workspace")
	keep := filepath.Join(ws, "keep")
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keep, "standin"), []byte("root's own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := localbox.RemoveAccount(dir, "gone", localbox.RemoveAccountOptions{ClaimsDir: claims})
	if !ended(goneProc) {
		t.Errorf("a process of the removed account's uid %d outlived it", gone.Account.UID)
	}
	if b, _ := os.ReadFile(filepath.Join(keep, "standin")); string(b) != "root's own\n" {
		t.Errorf("root removed the account's tree as itself: a file of root's in it is gone")
	}
	if err == nil || !strings.Contains(err.Error(), "files remain that the box's user could not remove") {
		t.Errorf("RemoveAccount with a file of root's in the box: %v", err)
	}
	if _, err := localbox.RemoveAccount(dir, "taken", localbox.RemoveAccountOptions{ClaimsDir: claims}); err != nil {
		t.Fatal(err)
	}
	if !ended(marked) {
		t.Errorf("a process of the removed account (its marker, its old uid) outlived it")
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(twins.Process.Pid) + "/stat"); err != nil || strings.Contains(string(b), ") Z ") {
		t.Errorf("a process of %s, which has the removed account's old uid now, was ended", twin)
	}
	if _, err := os.Lstat(filepath.Join(dir, "accounts", "taken")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the boxes of account taken outlived it: %v", err)
	}
}

// Account names that would be paths, or too long for a Unix user: add
// refuses each in one line naming it, and makes nothing (no directory, no
// claim, no Unix user); remove finds no such account and removes nothing.
func TestAccountBadNames(t *testing.T) {
	dir, claims, prefix := rootState(t)
	if err := localbox.MkdirState(dir); err != nil {
		t.Fatal(err)
	}
	listing := func() []string {
		var out []string
		for _, d := range []string{filepath.Dir(dir), dir} {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
		return out
	}
	before := listing()
	// Other packages' tests add users meanwhile: only this test's prefix counts.
	users := func() (out []string) {
		pw, _ := os.ReadFile("/etc/passwd")
		for _, l := range strings.Split(string(pw), "\n") {
			if strings.HasPrefix(l, prefix) {
				out = append(out, l)
			}
		}
		return out
	}
	pw := users()
	for _, name := range []string{"../x", "/x", "x/y", "", ".", "..", "-x", "Alice", "a_b", strings.Repeat("a", 23), "owner", "a\nb"} {
		_, err := localbox.AddAccount(dir, name, localbox.AddAccountOptions{UserPrefix: prefix, ClaimsDir: claims, Token: true})
		if err == nil || !strings.HasPrefix(err.Error(), "bad account name ") || strings.Contains(err.Error(), "\n") && !strings.Contains(name, "\n") {
			t.Errorf("AddAccount(%q): %v, want one line naming the bad account name", name, err)
		}
		if _, err := localbox.RemoveAccount(dir, name, localbox.RemoveAccountOptions{ClaimsDir: claims}); err == nil || !strings.Contains(err.Error(), "no account") {
			t.Errorf("RemoveAccount(%q): %v, want no such account", name, err)
		}
	}
	if after := listing(); !slices.Equal(before, after) {
		t.Errorf("bad account names changed the state:\nbefore %q\nafter  %q", before, after)
	}
	if now := users(); !slices.Equal(now, pw) {
		t.Errorf("bad account names changed /etc/passwd: %q, was %q", now, pw)
	}
}

// A remove that stops half-way (a file of root's in a box, as here, or a
// kill) leaves the account for the next remove to finish: it is served
// no more meanwhile, nor added again, and once the file is out of the
// way the next remove deletes its boxes, its Unix user and its claim.
// Before, the record went first: the next remove said there was no such
// account, and the user, its boxes and its claim stayed, for an account
// added again under the name to take over, uid and files.
func TestRemoveAccountResumes(t *testing.T) {
	dir, claims, prefix := rootState(t)
	if err := localbox.MkdirState(dir); err != nil {
		t.Fatal(err)
	}
	a, tok := addAccount(t, dir, claims, prefix, "half")
	srv := &localbox.Server{Dir: dir, Logf: t.Logf}
	if err := srv.CreateBox(localbox.DefaultBox); err != nil {
		t.Fatal(err)
	}
	lis, u, err := localbox.Listen(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	c := dial(t, u, tok)
	if _, _, _, err := execIn(c, "main", "true"); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "accounts", "half", "boxes", "main", "workspace", "keep")
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keep, "standin"), []byte("root's own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := localbox.RemoveAccount(dir, "half", localbox.RemoveAccountOptions{ClaimsDir: claims, Reload: func() { srv.Reload() }}); err == nil {
		t.Fatal("RemoveAccount with a directory of root's in the box succeeded")
	}
	if _, _, _, err := execIn(c, "main", "true"); !errors.Is(err, box.ErrUnauthenticated) {
		t.Errorf("the half-removed account's token: %v, want UNAUTHENTICATED", err)
	}
	if _, err := localbox.AddAccount(dir, "half", localbox.AddAccountOptions{UserPrefix: prefix, ClaimsDir: claims, Token: true}); err == nil || !strings.Contains(err.Error(), "account remove half") {
		t.Errorf("adding the half-removed account again: %v, want a refusal naming account remove", err)
	}
	if err := os.RemoveAll(keep); err != nil {
		t.Fatal(err)
	}
	r, err := localbox.RemoveAccount(dir, "half", localbox.RemoveAccountOptions{ClaimsDir: claims, Reload: func() { srv.Reload() }})
	if err != nil {
		t.Fatalf("the second remove: %v", err)
	}
	if !r.UserDeleted {
		t.Errorf("the second remove says the user was not deleted")
	}
	if _, err := user.Lookup(a.Account.UnixUser); err == nil {
		t.Errorf("the Unix user %s outlived its account", a.Account.UnixUser)
	}
	if _, err := os.Lstat(filepath.Join(claims, a.Account.UnixUser)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the claim of %s outlived its account: %v", a.Account.UnixUser, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "accounts", "half")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the boxes of account half outlived it: %v", err)
	}
	if _, err := localbox.RemoveAccount(dir, "half", localbox.RemoveAccountOptions{ClaimsDir: claims}); err == nil || !strings.Contains(err.Error(), "no account") {
		t.Errorf("a third remove: %v, want no such account", err)
	}
}

// A claim whose state directory is gone (or was made again at its path)
// is stale, and the next local box takes its user over; what the gone
// one's boxes left running as that user ends first. The break test planted such a process (its
// environment cleared, so stop's sweep passed it over) under `user`, and
// it read the next local box's 0600 files.
func TestStaleClaimTakeover(t *testing.T) {
	dir1, claims, prefix := rootState(t)
	dir2 := filepath.Join(filepath.Dir(dir1), "state2")
	for _, d := range []string{dir1, dir2} {
		if err := localbox.MkdirState(d); err != nil {
			t.Fatal(err)
		}
	}
	own := prefix + "own"
	if out, err := exec.Command("useradd", "-M", "-s", "/usr/sbin/nologin", own).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v %s", own, err, out)
	}
	u, err := user.Lookup(own)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := localbox.ClaimOwnerUser(claims, dir1, own); err != nil {
		t.Fatal(err)
	}
	left := exec.Command("sleep", "600")
	left.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { left.Process.Kill(); left.Wait() })
	done := make(chan struct{})
	go func() { left.Wait(); close(done) }()

	if err := os.RemoveAll(dir1); err != nil {
		t.Fatal(err)
	}
	if err := localbox.ClaimOwnerUser(claims, dir2, own); err != nil {
		t.Fatalf("the next local box takes the stale claim: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("the gone local box's process %d still runs as %s after the next took it over", left.Process.Pid, own)
	}
	// The same path, removed and made again: the claim is the old
	// directory's, and the old one's processes end too.
	remade := exec.Command("sleep", "600")
	remade.SysProcAttr = left.SysProcAttr
	if err := remade.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remade.Process.Kill(); remade.Wait() })
	remadeDone := make(chan struct{})
	go func() { remade.Wait(); close(remadeDone) }()
	if err := os.RemoveAll(dir2); err != nil {
		t.Fatal(err)
	}
	if err := localbox.MkdirState(dir2); err != nil {
		t.Fatal(err)
	}
	if err := localbox.ClaimOwnerUser(claims, dir2, own); err != nil {
		t.Fatalf("the remade state directory takes its path's claim: %v", err)
	}
	select {
	case <-remadeDone:
	case <-time.After(10 * time.Second):
		t.Errorf("the removed state directory's process %d still runs as %s after one made again at its path took the claim", remade.Process.Pid, own)
	}
	// A live claim's processes are not ended by a claim that is refused.
	again := exec.Command("sleep", "600")
	again.SysProcAttr = left.SysProcAttr
	if err := again.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Process.Kill(); again.Wait() })
	if err := localbox.ClaimOwnerUser(claims, dir1+"x", own); err == nil {
		t.Fatal("a third local box took a live claim")
	}
	if err := again.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("a refused claim ended the live claim's process: %v", err)
	}
}
