//go:build unix

package localbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/printable"
)

// boxUser is the account box commands run as when Server.User is set: a
// real box's user is never root (the contract's is `user`), and tools
// refuse to run as root (Claude Code's bypass mode among them).
type boxUser struct {
	name     string
	uid, gid uint32
	groups   []uint32
}

// lookupBoxUser finds the account name in the system's user database.
func lookupBoxUser(name string) (*boxUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("box user %q: no such account; create it (useradd -m -s /bin/bash %s) or choose another", name, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("box user %q: uid %s gid %s are not numbers", name, u.Uid, u.Gid)
	}
	bu := &boxUser{name: u.Username, uid: uint32(uid), gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				bu.groups = append(bu.groups, uint32(n))
			}
		}
	}
	return bu, nil
}

// userOf is the account box b's commands run as, or nil for the server's
// own user: the owner's boxes run as the server's one box user, every
// other account's as its own Unix user (accounts.go).
func (s *Server) userOf(b *box) *boxUser {
	if b.account == "" {
		return s.boxUser
	}
	if u := s.accountUser(b.account); u != nil {
		return u
	}
	// An account's box never runs as the server's own user (root): a box
	// whose user went away meanwhile gets nobody's credentials.
	return nobody
}

var nobody = &boxUser{name: "nobody", uid: 65534, gid: 65534}

// sysProcAttr is the attributes a process of box b starts with: its box
// user's credentials when it has one.
func (s *Server) sysProcAttr(b *box) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if u := s.userOf(b); u != nil {
		a.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
	}
	return a
}

// userName is box b's user's name for USER and LOGNAME, or "" for the
// server's own.
func (s *Server) userName(b *box) string {
	if u := s.userOf(b); u != nil {
		return u.name
	}
	return ""
}

// chownBox makes box b's run directory, and gives box b's user its
// home, workspace and run directories (not what is in them), and makes
// the box's own directory traversable. Home and workspace are entries of
// b.dir, which is root's and 0711, and the run directory one of runBase,
// root's and 0711 when root serves, so the box user cannot put a link in
// their place; what is inside them is the box user's, and the server
// changes it only through asUser.
func (s *Server) chownBox(b *box) error {
	if err := mkdirRunBase(filepath.Dir(b.run())); err != nil {
		return err
	}
	u := s.userOf(b)
	if u == nil {
		return mkdirOwn(b.run(), 0o700)
	}
	if err := os.Chmod(b.dir, 0o711); err != nil {
		return err
	}
	for _, d := range []string{b.home(), b.workspace(), b.run()} {
		if err := mkdirOwn(d, 0o700); err != nil {
			return err
		}
		if err := os.Lchown(d, int(u.uid), int(u.gid)); err != nil {
			return err
		}
	}
	return nil
}

// mkdirRunBase makes base (runBase) unless it exists, and refuses one
// that is not a directory of this user's that only it may write: in /tmp
// another user may have taken the name first, with a link or a directory
// of its own. Served by root it is 0711, so that each box user reaches
// its own run directory by name and lists none; else 0700.
func mkdirRunBase(base string) error {
	perm := fs.FileMode(0o700)
	if os.Geteuid() == 0 {
		perm = 0o711
	}
	if err := os.Mkdir(base, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(base)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s, where the boxes' run directories go, is not a directory of this user's that only it may write; remove it and start again", base)
	}
	return os.Chmod(base, perm)
}

// removeRun removes box b's run directory, its user's files as its user
// (removeRunDir), once nothing of the box runs.
func (s *Server) removeRun(b *box) {
	if err := removeRunDir(b.run(), s.userOf(b)); err != nil {
		s.logf("box %s: %v", b.Name, err)
	}
}

// asUserTimeout bounds one asUser child.
const asUserTimeout = 10 * time.Second

// asUser runs script with /bin/sh -c as box b's user (its credentials;
// HOME, COCOONBOX_RUN_DIR and a plain PATH; args as $1…), with stdin, and
// waits for it at most asUserTimeout, and for the end of its stdin and
// stderr pipes at most pipeDelay after it exits. It is the one way the server
// creates, links or removes anything under a box's home or run directory:
// the child can do only what the box user can, so a symlink or hard link
// the box user planted there reaches nothing of root's. The error carries
// the child's stderr, escaped and cut to one line.
func (s *Server) asUser(b *box, stdin []byte, script string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), asUserTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Dir = b.home()
	cmd.Env = []string{"HOME=" + b.home(), "COCOONBOX_RUN_DIR=" + b.run(), "PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = s.sysProcAttr(b)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// The child is the box user's, so a process of that user may take
	// its pipes (pidfd_getfd) and hold them open: the copies of stdin
	// and stderr end pipeDelay after the child does, not at the pipes'
	// end. Its exit status says whether its work was done.
	cmd.WaitDelay = pipeDelay
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		s.logf("box %s: a process of its user held the pipes of a helper of the server's", b.Name)
		err = nil
	}
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("%v: %s", err, printable.Line(msg, 300))
		}
		return err
	}
	return nil
}

// checkReach makes the state directory and boxes/ traversable (0711: no
// listing) and checks that the box user can reach them: every directory
// above must let it search. Else it names the directory and the fix.
func (s *Server) checkReach() error {
	u := s.boxUser
	if u == nil {
		return nil
	}
	if err := CheckStateOwner(s.Dir); err != nil {
		return err
	}
	for _, d := range []string{s.Dir, filepath.Join(s.Dir, "boxes")} {
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	if d := closedAbove(s.Dir, u); d != "" {
		return fmt.Errorf("box user %s cannot reach the state directory %s: %s is closed to it; choose a state directory it can reach, or open it with: chmod o+x %s", u.name, s.Dir, d, d)
	}
	return nil
}

// CheckStateOwner refuses, when run by root, a state directory dir that
// a user other than root could swap: dir and every directory above it
// must be root's and writable by no one else (a sticky directory such as
// /tmp aside, where no one else may rename root's entries). Else a box
// user who owns a directory above it (sudo with the box user's HOME) could
// move the state directory away and put its own in its place, with a link
// for box main, and root would chown what the link leads to (/home, /run)
// to it and append its log to any file. The error names the directory and
// the next step. The path is resolved first; a component of the named
// path that is a link must be root's too.
func CheckStateOwner(dir string) error {
	abs, d, err := rootOnly(dir)
	if err != nil || d == "" {
		return err
	}
	return stateOwnerError(abs, d)
}

// stateOwnerError is CheckStateOwner's refusal of state directory abs for
// directory d on the way to it.
func stateOwnerError(abs, d string) error {
	if d == abs {
		return fmt.Errorf("the state directory %s (%s) is a directory which a user other than root can change: run by root, the local box keeps its state where only root writes; next: %s", abs, describe(d), startRecipe)
	}
	return fmt.Errorf("the state directory %s is under %s (%s), which a user other than root can change: run by root, the local box keeps its state where only root writes; next: %s", abs, d, describe(d), startRecipe)
}

// CheckBinOwner refuses, when run by root, binaries that a user other
// than root could replace: exe (the running cocoonbox) and every directory
// above it, as CheckStateOwner has them. Else a box user who can write the
// binaries' directory (sudo ~user/go/bin/cocoonbox) would have root run
// its own program at the next start. The error names the file or
// directory and the next step.
func CheckBinOwner(exe string) error {
	abs, d, err := rootOnly(exe)
	if err != nil || d == "" {
		return err
	}
	where := abs + " is under " + d
	if d == abs {
		where = abs
	}
	return fmt.Errorf("%s (%s), which a user other than root can change: run by root, the local box runs only binaries that only root can replace; next: %s", where, describe(d), BinRecipe)
}

// rootOnly walks p (made absolute, and resolved when it holds links) up to
// /, and returns the first file or directory on the way that is not
// root's or that another user may write (a sticky directory aside), or ""
// when there is none or the caller is not root.
func rootOnly(p string) (abs, bad string, err error) {
	if os.Geteuid() != 0 {
		return "", "", nil
	}
	abs, err = filepath.Abs(p)
	if err != nil {
		return "", "", err
	}
	chains := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		chains = append(chains, real)
	}
	for _, c := range chains {
		for d := c; ; d = filepath.Dir(d) {
			fi, err := os.Lstat(d)
			if err != nil {
				return "", "", err
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			m := fi.Mode()
			others := m.Perm()&0o002 != 0 && (!m.IsDir() || m&fs.ModeSticky == 0)
			group := m.Perm()&0o020 != 0 && st.Gid != 0
			if !ok || st.Uid != 0 || (m.Type()&fs.ModeSymlink == 0 && (others || group)) {
				return abs, d, nil
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return abs, "", nil
}

// closedAbove is the first directory above dir that u may not search,
// walking from / down (so the one to open first), or "".
func closedAbove(dir string, u *boxUser) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	var above []string
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		above = append(above, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(above) - 1; i >= 0; i-- {
		if !searchable(above[i], u) {
			return above[i]
		}
	}
	return ""
}

// describe is d's mode and owner, as ls -ld shows them, for a message.
func describe(d string) string {
	fi, err := os.Stat(d)
	if err != nil {
		return "missing"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner := strconv.FormatUint(uint64(st.Uid), 10)
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
		return fmt.Sprintf("%04o, %s's", fi.Mode().Perm(), owner)
	}
	return fmt.Sprintf("%04o", fi.Mode().Perm())
}

// searchable reports whether u may search directory d.
func searchable(d string, u *boxUser) bool {
	fi, err := os.Stat(d)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	m := fi.Mode().Perm()
	switch {
	case st.Uid == u.uid:
		return m&0o100 != 0
	case st.Gid == u.gid || containsGID(u.groups, st.Gid):
		return m&0o010 != 0
	}
	return m&0o001 != 0
}

func containsGID(gs []uint32, g uint32) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// DefaultUser is the box user a local box served by root runs box
// commands as, when the account exists and can reach the state directory
// (docs/cocoonbox.md "Local box"): the contract's box user.
const DefaultUser = "user"

// StateRecipe and BinRecipe are the tested next steps (docs/cocoonbox.md
// "Served by root") for a state directory and binaries out of the box
// user's reach. StateRecipe moves a local box that runs; startRecipe is
// its tail, for the refusals of start, serve and stop, where none runs
// there to stop.
const (
	StateRecipe = "cocoonbox localbox stop; " + startRecipe
	startRecipe = "export XDG_STATE_HOME=/srv/cocoonbox; cocoonbox localbox start"
	BinRecipe   = "GOBIN=/usr/local/bin make install PREFIX=/usr/local (in the source tree), then run /usr/local/bin/cocoonbox"
)

// unreachable says why box user u cannot serve the boxes of state
// directory dir with binaries in bin, or "": in three lines, the first
// directory it cannot search from / down, above the state directory or
// the binaries; the recipe; and the chmod that opens them. A note given
// is a line of its own after the first.
func unreachable(u *boxUser, dir, bin string, note ...string) string {
	var closed, next, open []string
	if d := closedAbove(dir, u); d != "" {
		closed = append(closed, fmt.Sprintf("%s (%s) above the state directory %s", d, describe(d), dir))
		next, open = append(next, startRecipe), append(open, d)
	}
	if d := closedAbove(filepath.Join(bin, "cocoonbox-agent"), u); d != "" {
		closed = append(closed, fmt.Sprintf("%s (%s) above the binaries' directory %s", d, describe(d), bin))
		next, open = append(next, BinRecipe), append(open, d)
	}
	if len(closed) == 0 {
		return ""
	}
	open = slices.Compact(open)
	first := "the box user `" + u.name + "` cannot search " + strings.Join(closed, ", nor ")
	for _, n := range note {
		first += "\n" + n
	}
	return fmt.Sprintf("%s\nnext: %s\nor let it search (not list) what is closed: chmod o+x %s, and start again",
		first, strings.Join(next, "; and "), strings.Join(open, " "))
}

// MkdirState makes the state directory dir with the parents it lacks:
// 0700, or 0711 (searchable, not listable) when run by root and the box
// user exists, so the box user reaches the boxes through the directories
// the local box made; those the user made keep their modes. Every secret
// in them is a 0600 file (docs/security.md).
//
// Run by root, it checks before it makes anything (mkdirPrivate), and
// then the whole directory with CheckStateOwner.
func MkdirState(dir string) error {
	if os.Geteuid() != 0 {
		return os.MkdirAll(dir, 0o700)
	}
	perm := os.FileMode(0o700)
	if _, err := lookupBoxUser(DefaultUser); err == nil {
		perm = 0o711
	}
	if err := mkdirPrivate(dir, perm); err != nil {
		return err
	}
	return CheckStateOwner(dir)
}

// mkdirPrivate makes directory dir of the state and the parents it
// lacks, mode perm (those that were there keep theirs). Run by root, it
// makes nothing through a path another user could change: the deepest
// directory that exists must first pass rootOnly (root's and writable by
// no one else, on the way up and resolved), else the state directory is
// refused as CheckStateOwner refuses it; each missing directory is then
// made with mkdirat in the one above, held open, and opened again with
// O_NOFOLLOW, and must be a directory of root's that no one else may
// write. So an entry someone else put there first (a link, or a directory
// of theirs, in a sticky /tmp) is refused by name and nothing is made
// through it: without this, root made the missing directories first and
// checked after, so a link in a parent the box user owns
// (~user/.local -> elsewhere) had root make directories wherever it led.
func mkdirPrivate(dir string, perm os.FileMode) error {
	if os.Geteuid() != 0 {
		return os.MkdirAll(dir, perm)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var missing []string
	top := abs
	for {
		if _, err := os.Lstat(top); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if top == filepath.Dir(top) {
			return fmt.Errorf("make %s: no directory above it exists", abs)
		}
		missing = append(missing, filepath.Base(top))
		top = filepath.Dir(top)
	}
	if _, bad, err := rootOnly(top); err != nil {
		return err
	} else if bad != "" {
		return stateOwnerError(abs, bad)
	}
	fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: top, Err: err}
	}
	d := top
	for i := len(missing) - 1; i >= 0; i-- {
		name := missing[i]
		d = filepath.Join(d, name)
		made := true
		if err := unix.Mkdirat(fd, name, uint32(perm)); errors.Is(err, unix.EEXIST) {
			made = false
		} else if err != nil {
			unix.Close(fd)
			return &fs.PathError{Op: "mkdir", Path: d, Err: err}
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			// ELOOP or ENOTDIR: someone else's link or file took the name.
			return fmt.Errorf("the state directory %s: %s appeared as no directory of root's (%v): run by root, the local box keeps its state where only root writes; next: %s", abs, d, err, startRecipe)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return err
		}
		if st.Uid != 0 || st.Mode&0o022 != 0 && !made {
			unix.Close(fd)
			return stateOwnerError(abs, d)
		}
		if made {
			// The umask took bits of perm away.
			if err := unix.Fchmod(fd, uint32(perm)); err != nil {
				unix.Close(fd)
				return err
			}
		}
	}
	unix.Close(fd)
	return nil
}

// boxUIDs are the uids box commands of s run as, whose processes alone
// endMarked looks at: served by root, the owner's box user's (root's own
// when it has none, as in-process tests serve) and each account's,
// recorded; nil, every process this user may see, otherwise.
func (s *Server) boxUIDs() []uint32 {
	if os.Geteuid() != 0 {
		return nil
	}
	uids := []uint32{0}
	if s.boxUser != nil {
		uids[0] = s.boxUser.uid
	}
	if s.accts != nil {
		for _, n := range s.accts.names() {
			if la, ok := s.accts.get(n); ok {
				uids = append(uids, la.UID)
			}
		}
	}
	return uids
}
