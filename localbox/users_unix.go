//go:build unix

package localbox

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/flock"
)

// DefaultClaimsDir is the machine-wide record of which local box owns
// which Unix user: one file per user name (root's, 0600, in this 0700
// directory), naming the state directory and account that hold it. No
// two local boxes on a machine, and no two accounts of one, hold the same
// user or the same uid.
const DefaultClaimsDir = "/var/lib/cocoonbox/claims"

// claim is one file of the claims directory.
type claim struct {
	// StateDir is the absolute state directory of the local box that holds
	// the user, Account the account there (OwnerAccount for the owner's).
	StateDir string `json:"state_dir"`
	Account  string `json:"account"`
	UID      uint32 `json:"uid"`
	// Dir is the state directory's identity when the claim was made
	// (its claim-id file), so that one removed and made again at the same
	// path is told from the one that claimed (an inode number is reused at
	// once); empty in older claims.
	Dir string `json:"dir,omitempty"`
}

// claimIDFile is the file in a state directory that names it for its
// claims: 32 random hex digits, made by the first claim (docs/cocoonbox.md).
const claimIDFile = "claim-id"

// dirID is the identity of state directory dir (its claim-id file), or ""
// when it has none that reads.
func dirID(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, claimIDFile))
	if s := strings.TrimSpace(string(b)); err == nil && len(s) == 32 {
		return s
	}
	return ""
}

// makeDirID is dirID of dir, made first when dir has none: run by root
// in a state directory only root changes (checked before it is made).
func makeDirID(dir string) string {
	if id := dirID(dir); id != "" {
		return id
	}
	b := make([]byte, 16)
	rand.Read(b)
	id := hex.EncodeToString(b)
	if err := atomicfile.WriteFile(filepath.Join(dir, claimIDFile), []byte(id+"\n"), 0o600); err != nil {
		return ""
	}
	return id
}

var unixNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`) })

// gecosMark is the comment of a Unix user the local box made, so that a
// user is known for one of ours even without its claim.
func gecosMark(stateDir, account string) string {
	return "cocoonbox localbox " + stateDir + " account " + account
}

// withClaims runs f with the claims directory made (root's, 0700) and
// locked.
func withClaims(claims string, f func() error) error {
	if err := os.MkdirAll(claims, 0o700); err != nil {
		return fmt.Errorf("the claims directory: %w", err)
	}
	fi, err := os.Lstat(claims)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("the claims directory %s must be root's directory, 0700 (it is %s): fix it with chown root %s && chmod 0700 %s", claims, describe(claims), claims, claims)
	}
	lock, err := os.OpenFile(filepath.Join(claims, ".lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := flock.Lock(lock, flock.Exclusive); err != nil {
		return err
	}
	defer flock.Unlock(lock)
	return f()
}

func readClaim(claims, name string) (claim, bool) {
	var c claim
	b, err := os.ReadFile(filepath.Join(claims, name))
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, false
	}
	return c, true
}

// live reports whether c's local box still has its state: a claim whose
// state directory is gone (or was made again since, at the same path) is
// stale, and the next claimant takes it.
func (c claim) live() bool {
	fi, err := os.Stat(c.StateDir)
	return err == nil && fi.IsDir() && (c.Dir == "" || dirID(c.StateDir) == c.Dir)
}

// holderOf says who holds a claim, for a message.
func (c claim) holder(stateDir string) string {
	if c.StateDir == stateDir {
		return "account " + c.Account + " of this local box"
	}
	return "the local box at " + c.StateDir + " (account " + c.Account + ")"
}

// claimUser gives unix to account of the local box at stateDir: it makes
// the user (useradd, no password, no login shell) unless mapped, checks
// that no other local box or account holds it or its uid, and records the
// claim. created says it made the user.
func claimUser(claims, stateDir, account, unix string, mapped bool) (u *boxUser, created bool, err error) {
	// Each way out names the other flag: --unix-user and "leave it out"
	// alone sent a user back and forth between two refusals.
	made := "the local box makes " + DefaultUserPrefix + account + ", or P" + account + " with --user-prefix P"
	other := "choose another prefix with --user-prefix P (the local box makes P" + account + " instead), or map an existing Unix user with --unix-user NAME"
	if mapped {
		other = "map another existing Unix user with --unix-user NAME, or leave out --unix-user: " + made
	}
	if account == OwnerAccount {
		other = "serve this local box as a user who is not root (its boxes then run as that user), or remove that account there first"
	}
	if !unixNameRE().MatchString(unix) {
		return nil, false, fmt.Errorf("bad unix user name %q: use 1 to 32 of a-z, 0-9, _ and -, not starting with -", unix)
	}
	err = withClaims(claims, func() error {
		prev, had := readClaim(claims, unix)
		if had && prev.live() && (prev.StateDir != stateDir || prev.Account != account) {
			return fmt.Errorf("unix user %s belongs to %s; %s", unix, prev.holder(stateDir), other)
		}
		pw, lerr := user.Lookup(unix)
		switch {
		case lerr != nil && mapped:
			return fmt.Errorf("no unix user %s; create it (useradd -M -s /usr/sbin/nologin %s), or leave out --unix-user: %s", unix, unix, made)
		case lerr != nil:
			if err := addUnixUser(unix, gecosMark(stateDir, account), aboveRetired(claims)); err != nil {
				return err
			}
			created = true
		case strings.HasPrefix(pw.Name, "cocoonbox localbox ") && pw.Name != gecosMark(stateDir, account):
			return fmt.Errorf("unix user %s was made for another local box or account (%q); %s", unix, pw.Name, other)
		case !mapped && pw.Name != gecosMark(stateDir, account):
			return fmt.Errorf("unix user %s exists and the local box did not make it; to run account %s as it, map it: --unix-user %s; else choose another prefix with --user-prefix P (the local box makes P%s)", unix, account, unix, account)
		}
		var err error
		if u, err = lookupBoxUser(unix); err != nil {
			return err
		}
		if u.uid == 0 || u.gid == 0 {
			if created {
				deleteUnixUser(unix)
			}
			return fmt.Errorf("unix user %s has uid or gid 0: a box user is never root; %s", unix, other)
		}
		if retired(claims, u.uid) || retired(claims, u.gid) {
			if created {
				deleteUnixUser(unix)
			}
			return fmt.Errorf("unix user %s has uid %d and gid %d, and one of them was a removed account's, whose files may remain outside the state directory (in /tmp, say); no two accounts share a uid, ever: %s", unix, u.uid, u.gid, other)
		}
		ents, _ := os.ReadDir(claims)
		for _, e := range ents {
			if e.Name() == unix || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if c, ok := readClaim(claims, e.Name()); ok && c.UID == u.uid && c.live() {
				if created {
					deleteUnixUser(unix)
				}
				return fmt.Errorf("unix user %s has uid %d, as unix user %s of %s; no two accounts share a uid: %s", unix, u.uid, e.Name(), c.holder(stateDir), other)
			}
		}
		// A stale claim's state directory is gone, but what its boxes left
		// running as the user (a command that cleared its environment
		// escapes stop's sweep) would read this local box's files: it ends
		// before the user is this one's.
		cur := makeDirID(stateDir)
		if had && (prev.StateDir != stateDir || prev.Account != account || prev.Dir != "" && prev.Dir != cur) && prev.UID == u.uid {
			if err := killUser(u.uid, 5*time.Second); err != nil {
				return fmt.Errorf("unix user %s was the box user of the local box at %s, which is gone, and its processes did not end (%v); end them (pkill -KILL -u %s) and start again", unix, prev.StateDir, err, unix)
			}
		}
		b, _ := json.Marshal(claim{StateDir: stateDir, Account: account, UID: u.uid, Dir: cur})
		if err := atomicfile.WriteFile(filepath.Join(claims, unix), append(b, '\n'), 0o600); err != nil {
			if created {
				deleteUnixUser(unix)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return u, created, nil
}

// ClaimOwnerUser records that the owner's box user name belongs to the
// local box at stateDir, in the claims directory claims (empty:
// DefaultClaimsDir), or says in one line whose it is. Run by root only; a
// server not run by root switches to no user and claims none.
func ClaimOwnerUser(claims, stateDir, name string) error {
	if os.Geteuid() != 0 || name == "" {
		return nil
	}
	if claims == "" {
		claims = DefaultClaimsDir
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return err
	}
	_, _, err = claimUser(claims, abs, OwnerAccount, name, true)
	return err
}

// OwnerUser chooses and claims, in the claims directory claims (empty:
// DefaultClaimsDir), the Unix user the owner's boxes of the local box at
// stateDir run as when it is served by root, with its binaries in bin.
// The first local box on the machine gets DefaultUser, as before
// accounts. Any other, while that one's state lives, gets a user made
// for it (useradd, no password, no login shell, its comment naming the
// state directory): prefix (empty: DefaultUserPrefix) + "owner_" + the
// first 8 hex digits of the sha256 of the state directory's absolute
// path, which no account's user is named (account names have no "_");
// so no two local boxes' owners share a uid. A state directory keeps the
// user it claimed first, even once DefaultUser is free again: its boxes'
// files are that user's.
//
// note is "" for DefaultUser, else what start and status add to the
// user's name ("made for this local box: …"). Not run by root, it is
// "", "", nil: box commands run as the server's own user. Errors: no
// DefaultUser (with the useradd that makes it), a directory closed to
// the user (unreachable's three lines, for rootLine), a claim refused.
func OwnerUser(claims, stateDir, bin, prefix string) (name, note string, err error) {
	if os.Geteuid() != 0 {
		return "", "", nil
	}
	if claims == "" {
		claims = DefaultClaimsDir
	}
	if prefix == "" {
		prefix = DefaultUserPrefix
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return "", "", err
	}
	name = ownerClaimOf(claims, abs)
	if c, ok := readClaim(claims, DefaultUser); name == "" && ok && c.live() && c.StateDir != abs {
		// DefaultUser is another local box's: this one would run as a
		// user made for it, which a refusal names, and which is not made
		// (nor claimed) while it could not reach the state directory.
		name = madeOwnerName(prefix, abs)
		if _, err := lookupBoxUser(name); err != nil {
			fresh := &boxUser{name: name, uid: ^uint32(0) - 1, gid: ^uint32(0) - 1}
			note := "(a user this local box would make: the Unix user `" + DefaultUser + "` is the owner's of the local box at " + c.StateDir + ")"
			if why := unreachable(fresh, abs, bin, note); why != "" {
				return "", "", errors.New(why)
			}
		}
	}
	if name == "" || name == DefaultUser {
		u, err := lookupBoxUser(DefaultUser)
		if err != nil {
			return "", "", err
		}
		if why := unreachable(u, abs, bin); why != "" {
			return "", "", errors.New(why)
		}
		err = ClaimOwnerUser(claims, abs, DefaultUser)
		if err == nil {
			return DefaultUser, "", nil
		}
		if c, ok := readClaim(claims, DefaultUser); name == DefaultUser || !ok || !c.live() || c.StateDir == abs {
			return "", "", err
		}
		name = madeOwnerName(prefix, abs)
	}
	u, _, err := claimUser(claims, abs, OwnerAccount, name, false)
	if err != nil {
		return "", "", err
	}
	if why := unreachable(u, abs, bin); why != "" {
		return "", "", errors.New(why)
	}
	note = "made for this local box"
	if c, ok := readClaim(claims, DefaultUser); ok && c.live() && c.StateDir != abs {
		note += " (the Unix user `" + DefaultUser + "` is the owner's of the local box at " + c.StateDir + ")"
	}
	return name, note, nil
}

// madeOwnerName is the name of the Unix user made for the owner of the
// local box at abs: prefix, "owner_" and 8 hex digits of abs's sha256.
func madeOwnerName(prefix, abs string) string {
	sum := sha256.Sum256([]byte(abs))
	return prefix + "owner_" + hex.EncodeToString(sum[:4])
}

// ownerClaimOf is the Unix user claims gives the owner of the local box
// at stateDir, or "".
func ownerClaimOf(claims, stateDir string) string {
	ents, _ := os.ReadDir(claims)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if c, ok := readClaim(claims, e.Name()); ok && c.StateDir == stateDir && c.Account == OwnerAccount {
			return e.Name()
		}
	}
	return ""
}

// releaseClaim removes unix's claim if the local box at stateDir holds it.
func releaseClaim(claims, stateDir, unix string) error {
	return withClaims(claims, func() error {
		if c, ok := readClaim(claims, unix); ok && c.StateDir == stateDir {
			if err := os.Remove(filepath.Join(claims, unix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

// addUnixUser makes a user with its own group, no password (useradd's
// default: locked), no home of its own (its boxes' homes are set per
// command) and no login shell; with uid and gid at least min when min is
// not 0.
func addUnixUser(name, comment string, min uint32) error {
	shell := "/usr/sbin/nologin"
	if _, err := os.Stat(shell); err != nil {
		shell = "/bin/false"
	}
	args := []string{"--no-create-home", "--user-group", "--home-dir", "/nonexistent", "--shell", shell, "--comment", comment}
	if min != 0 {
		n := strconv.FormatUint(uint64(min), 10)
		args = append(args, "-K", "UID_MIN="+n, "-K", "GID_MIN="+n)
	}
	return runAdmin("useradd", append(args, name)...)
}

// retiredPrefix names the claims directory's record of an id (a uid or
// gid) of an account's Unix user that the local box deleted: that user's
// files may remain outside the state directory (a setuid copy of a shell
// in /tmp, say), so no later account may be given the id, which useradd
// would hand out again.
const retiredPrefix = ".retired-"

// retireIDs records ids as retired in claims.
func retireIDs(claims string, ids ...uint32) error {
	return withClaims(claims, func() error {
		for _, id := range ids {
			p := filepath.Join(claims, retiredPrefix+strconv.FormatUint(uint64(id), 10))
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return fmt.Errorf("record the retired id %d: %w", id, err)
			}
		}
		return nil
	})
}

// retired reports whether id was retired in claims.
func retired(claims string, id uint32) bool {
	_, err := os.Lstat(filepath.Join(claims, retiredPrefix+strconv.FormatUint(uint64(id), 10)))
	return err == nil
}

// aboveRetired is one above the highest id retired in claims, or 0 when
// none is.
func aboveRetired(claims string) uint32 {
	ents, _ := os.ReadDir(claims)
	var top uint32
	for _, e := range ents {
		if n, err := strconv.ParseUint(strings.TrimPrefix(e.Name(), retiredPrefix), 10, 32); err == nil && strings.HasPrefix(e.Name(), retiredPrefix) && uint32(n)+1 > top {
			top = uint32(n) + 1
		}
	}
	return top
}

// deleteUnixUser deletes a user the local box made, with its group.
func deleteUnixUser(name string) error { return runAdmin("userdel", name) }

func runAdmin(prog string, args ...string) error {
	path, err := exec.LookPath(prog)
	if err != nil {
		for _, d := range []string{"/usr/sbin", "/sbin"} {
			if p := filepath.Join(d, prog); fileExists(p) {
				path, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s not found: make the user yourself and map it with --unix-user NAME", prog)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", prog, args[len(args)-1], err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// boxParts are what of a box directory its user owns; "run" only in a
// state directory from before the run directory moved out (RunDir).
var boxParts = []string{"home", "workspace", "run"}

// removeBoxDir removes box directory dir, and its run directory
// (RunDir). u's files go first (removeParts), then root's own files. A
// file of u's beside the parts is refused, not removed.
func removeBoxDir(dir string, u *boxUser) error {
	if err := removeRunDir(RunDir(dir), u); err != nil {
		return err
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := removeParts(dir, u, boxParts...); err != nil {
		return err
	}
	removeExecDirs(dir)
	removeFlatDir(dir, "trust")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && u != nil && st.Uid == u.uid {
			return fmt.Errorf("remove %s: it is the box user's, and only its parts should be: leaving it", filepath.Join(dir, e.Name()))
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("%w; look at it as root, remove it by hand, then try again", err)
		}
	}
	return os.Remove(dir)
}

// removeExecDirs removes the exec server's socket and the directory the
// box sees (execDir) from box directory dir, so that removeBoxDir's loop
// finds execGuard empty. Each step is relative to a directory opened
// without following a link: a link at execGuard or execDir is not
// entered (the loop, or the unlink here, removes the link itself), so
// nothing is removed through one.
func removeExecDirs(dir string) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	g, err := unix.Open(filepath.Join(dir, "exec"), flags, 0)
	if err != nil {
		return
	}
	defer unix.Close(g)
	b, err := unix.Openat(g, "box", flags, 0)
	if err != nil {
		unix.Unlinkat(g, "box", 0) // a link, or no directory: never entered
		return
	}
	unix.Unlinkat(b, execSockName, 0)
	unix.Close(b)
	unix.Unlinkat(g, "box", unix.AT_REMOVEDIR)
}

// removeFlatDir removes directory name of box directory dir and the
// files in it, when it is this process's user's: a container box's
// trust/ (container_trust.go), root's copies of the machine's CA files.
// The directory is opened without following a link and its entries
// unlinked relative to it, never followed (a link at name is left for
// removeBoxDir's loop, which removes the link itself); a directory in
// it is left, and so the loop's error names it.
func removeFlatDir(dir, name string) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(filepath.Join(dir, name), flags, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Uid != uint32(os.Geteuid()) {
		return
	}
	ents, err := f.ReadDir(-1)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			unix.Unlinkat(fd, e.Name(), 0)
		}
	}
	unix.Unlinkat(unix.AT_FDCWD, filepath.Join(dir, name), unix.AT_REMOVEDIR)
}

// removeRunDir removes run directory run (RunDir) of a box whose user is
// u: as removeParts does, or with os.RemoveAll, which follows no link,
// when u is nil: the server's own user's tree (root's only in a test's
// server with no box user, whose box commands run as root anyway).
func removeRunDir(run string, u *boxUser) error {
	if u == nil {
		return os.RemoveAll(run)
	}
	if _, err := os.Lstat(run); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return removeParts(filepath.Dir(run), u, filepath.Base(run))
}

// removeParts removes the entries parts of directory dir, which is root's
// when u is a box user, and everything in them: u's files are opened to u
// (chmod -R u+rwX) and removed by `rm -rf` in a child with u's
// credentials, so that no link u planted leads root anywhere (neither
// follows a link met on the way, rm unlinks it, and u may change and
// remove only what u may); then root removes the parts themselves, which
// u cannot (they are in root's directory). u nil means the server's own
// user, whose tree it is, unless that is root: then nothing is removed. A
// part that is not empty after u's rm (a process of u's still writing) is
// an error to retry.
func removeParts(dir string, u *boxUser, parts ...string) error {
	if u == nil && os.Geteuid() == 0 {
		// A server run by root with no box user (only a test's can be):
		// its boxes' files are root's, but whatever a box holds is
		// hostile, and root removes none of it as itself.
		return fmt.Errorf("remove %s: the local box has no box user, and root removes no box's files as itself; remove it by hand", filepath.Join(dir, parts[0]))
	}
	// The user may have closed a directory of its own to itself (chmod
	// 000), which its rm could not enter: it opens its files first.
	rm := &exec.Cmd{Path: "/bin/sh", Args: append([]string{"sh", "-c", `chmod -R u+rwX -- "$@" 2>/dev/null; rm -rf -- "$@"`, "sh"}, parts...), Dir: dir, Env: []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}}
	if u != nil && os.Geteuid() == 0 {
		rm.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	}
	rm.Run() // it fails on the parts themselves, which root's directory holds
	for _, p := range parts {
		if err := os.Remove(filepath.Join(dir, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: files remain that the box's user could not remove (not its own, or a process of it still writing); look at them as root, then try again: %w", filepath.Join(dir, p), err)
		}
	}
	return nil
}

// accountIDs is the Unix user that owns account a's files and
// processes: the uid and gid recorded when it was added (nobody's group
// for a record from before gids were kept, unless the user database still
// has the name with that uid), with the database's groups only while the
// name still has that uid (live). A user deleted by hand, or made again
// under its name with another uid, leaves what it owned under the
// recorded ids: root ends and removes it as them, never as itself.
func accountIDs(a Account) (u *boxUser, live bool) {
	u = &boxUser{name: a.UnixUser, uid: a.UID, gid: a.GID}
	if cur, err := lookupBoxUser(a.UnixUser); err == nil && cur.uid == a.UID {
		if u.gid == 0 {
			u.gid = cur.gid
		}
		u.groups = cur.groups
		return u, true
	}
	if u.gid == 0 {
		u.gid = nobody.gid
	}
	return u, false
}

// endAccountProcs ends what runs as u, a removed account's user, in the
// local box at stateDir: every process of its uid (killUser), unless
// the account's user is gone and another user now has the uid (made by
// hand since), whose processes are not the account's; then only those of
// the uid that carry the local box's marker (markedProcs) are.
func endAccountProcs(stateDir string, u *boxUser, live bool) error {
	if u.uid == 0 {
		return nil
	}
	if other, err := user.LookupId(strconv.FormatUint(uint64(u.uid), 10)); err == nil && !live && other.Username != u.name {
		endProcs(markedProcs([]uint32{u.uid}, markerVar+"="+stateDir), 0)
		return nil
	}
	return killUser(u.uid, 5*time.Second)
}

// killUser ends every process of uid (never root's), SIGKILL again and
// again until none is left, or fails with EBUSY after timeout: removing
// an account ends every process of its Unix user, which no other account
// shares.
func killUser(uid uint32, timeout time.Duration) error {
	if uid == 0 {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for killUserOnce(uid) {
		if time.Now().After(deadline) {
			return syscall.EBUSY
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
