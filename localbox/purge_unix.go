//go:build unix

package localbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// machineUser is a Unix user a purge deletes or keeps.
type machineUser struct {
	boxUser
	made bool   // gecosMark names the state directory it belongs to
	dir  string // that state directory, for a kept user its claim's
}

// purgeWork is a plan with what carrying it out needs.
type purgeWork struct {
	plan   PurgePlan
	users  []machineUser
	claims []string
	engine EngineSettings
}

// PlanPurge says what Purge(dir, o) would remove, changing nothing.
func PlanPurge(dir string, o PurgeOptions) (PurgePlan, error) {
	w, err := planDir(dir, o)
	return w.plan, err
}

// Purge removes what the local box of state directory dir made on this
// machine, which must not be served (the caller holds its lock, Lock).
// Run by root, the state directory must be one only root changes
// (CheckStateOwner): box files are removed as their owner, never as
// root (removeBoxDir), and the rest only when no one else owns it. The
// claims and users of the state directory go even when it is gone already.
func Purge(dir string, o PurgeOptions) (PurgePlan, error) {
	w, err := planDir(dir, o)
	if err != nil {
		return w.plan, err
	}
	return w.plan, w.run(o)
}

// PlanOrphans says what PurgeOrphans(o) would remove, changing nothing.
func PlanOrphans(o PurgeOptions) (PurgePlan, error) {
	w, err := planOrphans(o)
	return w.plan, err
}

// PurgeOrphans removes, for every local box whose state directory is gone,
// what it left on the machine: the Unix users it made, its claims (a
// claim is stale, claim.live, when its state directory is gone or made
// again since), and the containers, volumes and networks a container
// engine holds for it (the engines of orphanEngines, by the state label;
// stateGone). A user or an engine object of a state directory that is
// there is left to that directory's purge. It needs root (ErrNeedsRoot).
func PurgeOrphans(o PurgeOptions) (PurgePlan, error) {
	w, err := planOrphans(o)
	if err != nil {
		return w.plan, err
	}
	return w.plan, w.run(o)
}

func claimsOf(o PurgeOptions) string {
	if o.ClaimsDir != "" {
		return o.ClaimsDir
	}
	return DefaultClaimsDir
}

func planDir(dir string, o PurgeOptions) (purgeWork, error) {
	var w purgeWork
	abs, err := filepath.Abs(dir)
	if err != nil {
		return w, err
	}
	w.plan.StateDir = abs
	if fi, err := os.Lstat(abs); err == nil {
		if !fi.IsDir() {
			return w, fmt.Errorf("%s is not a directory: not a local box's state; look at it, then remove it by hand", abs)
		}
		if err := CheckStateOwner(abs); err != nil {
			return w, err
		}
		w.plan.StateExists = true
		w.plan.Boxes = stateBoxes(abs)
		set, err := ReadEngineSettings(abs)
		if err != nil {
			return w, err
		}
		if set.Engine != EngineProcess {
			w.plan.Engine, w.engine = set.Engine, set
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return w, err
	}
	if os.Geteuid() != 0 {
		return w, nil
	}
	claims := claimsOf(o)
	for _, mu := range markedUsers() {
		if mu.dir == abs {
			w.add(mu)
		}
	}
	for name, c := range readClaims(claims) {
		if c.StateDir != abs {
			continue
		}
		w.claims = append(w.claims, name)
		if !slices.ContainsFunc(w.users, func(u machineUser) bool { return u.name == name }) {
			if u, err := lookupBoxUser(name); err == nil && u.uid == c.UID && u.uid != 0 {
				w.add(machineUser{boxUser: *u, dir: abs})
			}
		}
	}
	w.sort()
	return w, nil
}

func planOrphans(o PurgeOptions) (purgeWork, error) {
	var w purgeWork
	if os.Geteuid() != 0 {
		return w, ErrNeedsRoot
	}
	claims := claimsOf(o)
	cs := readClaims(claims)
	for _, mu := range markedUsers() {
		if c, ok := cs[mu.name]; ok && c.live() {
			continue
		}
		if _, err := os.Lstat(mu.dir); errors.Is(err, fs.ErrNotExist) {
			w.add(mu)
		}
	}
	for name, c := range cs {
		if c.live() {
			continue
		}
		w.claims = append(w.claims, name)
		if slices.ContainsFunc(w.users, func(u machineUser) bool { return u.name == name }) {
			continue
		}
		// Not made for a state directory that is gone: its processes of
		// that local box end, and it stays.
		if u, err := lookupBoxUser(name); err == nil && u.uid == c.UID && u.uid != 0 && gecosOf(name) != gecosMark(c.StateDir, c.Account) {
			w.add(machineUser{boxUser: *u, dir: c.StateDir})
		}
	}
	orphans, err := findEngineOrphans(context.Background())
	if err != nil {
		return w, err
	}
	w.plan.Orphans = orphans
	w.sort()
	return w, nil
}

func (w *purgeWork) add(u machineUser) {
	w.users = append(w.users, u)
	if u.made {
		w.plan.Users = append(w.plan.Users, u.name)
	} else {
		w.plan.Kept = append(w.plan.Kept, u.name)
	}
}

func (w *purgeWork) sort() {
	slices.Sort(w.claims)
	slices.Sort(w.plan.Users)
	slices.Sort(w.plan.Kept)
	w.plan.Claims = w.claims
}

// run carries w out, step by step.
func (w *purgeWork) run(o PurgeOptions) error {
	step := func(name string) {
		if o.Step != nil {
			o.Step(name)
		}
	}
	claims := claimsOf(o)
	abs := w.plan.StateDir

	step("procs")
	var uids []uint32
	for _, u := range w.users {
		uids = append(uids, u.uid)
	}
	if abs != "" && w.plan.StateExists {
		if os.Geteuid() == 0 {
			// Served by root, the box users' groups alone; with no user
			// known (a claims directory lost), none.
			sweepRecords(abs, append([]uint32{}, uids...), 2*time.Second, "", func(string, ...any) {})
		} else {
			sweepRecords(abs, nil, 2*time.Second, "", func(string, ...any) {})
			endProcs(markedProcs(nil, markerVar+"="+abs), 0)
		}
	}
	for _, u := range w.users {
		if u.made {
			if err := killUser(u.uid, 5*time.Second); err != nil {
				return fmt.Errorf("end the processes of %s (uid %d): %w; end them (pkill -KILL -u %s) and purge again", u.name, u.uid, err, u.name)
			}
			continue
		}
		endProcs(markedProcs([]uint32{u.uid}, markerVar+"="+u.dir), 0)
	}

	step("engine")
	if w.plan.Engine != "" {
		if err := PurgeEngine(context.Background(), w.engine, abs); err != nil {
			return fmt.Errorf("remove the boxes' containers, volumes and networks from %s: %w; purge again once it answers", w.plan.Engine, err)
		}
	}
	if err := purgeEngineOrphans(context.Background(), w.plan.Orphans); err != nil {
		return err
	}

	step("boxes")
	if w.plan.StateExists {
		for _, b := range stateBoxDirs(abs) {
			if err := removeBoxAsOwner(b); err != nil {
				return err
			}
		}
	}

	step("users")
	for _, u := range w.users {
		if !u.made {
			continue
		}
		// Looked up again: only the user the plan found, still marked.
		cur, err := lookupBoxUser(u.name)
		if err != nil {
			continue // deleted by a purge cut short
		}
		if dir, _, ok := parseMark(gecosOf(u.name)); cur.uid != u.uid || !ok || dir != u.dir {
			return fmt.Errorf("unix user %s changed while it was purged (uid %d, comment %q); look at it, then purge again", u.name, cur.uid, gecosOf(u.name))
		}
		// Files of the user may remain outside the state directory (in
		// /tmp, say): no later account gets its ids.
		if err := retireIDs(claims, u.uid, u.gid); err != nil {
			return err
		}
		if err := deleteUnixUser(u.name); err != nil {
			return err
		}
	}

	step("claims")
	if len(w.claims) > 0 {
		err := withClaims(claims, func() error {
			for _, name := range w.claims {
				c, ok := readClaim(claims, name)
				if !ok || (abs != "" && c.StateDir != abs) || (abs == "" && c.live()) {
					continue
				}
				if err := os.Remove(filepath.Join(claims, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("release the claims: %w", err)
		}
	}

	step("state")
	if w.plan.StateExists {
		return removeState(abs)
	}
	return nil
}

// stateBoxes names the boxes of the state directory abs, as PurgePlan
// has them.
func stateBoxes(abs string) []string {
	var out []string
	for _, d := range stateBoxDirs(abs) {
		rel, _ := filepath.Rel(abs, d)
		parts := strings.Split(rel, string(filepath.Separator))
		if parts[0] == "accounts" && len(parts) == 4 {
			out = append(out, parts[1]+"/"+parts[3])
		} else {
			out = append(out, parts[len(parts)-1])
		}
	}
	return out
}

// stateBoxDirs are the box directories of the state directory abs: the
// owner's, boxes/NAME, and each account's, accounts/ACCOUNT/boxes/NAME.
// Links are not followed (the state is root's, but a link is no box).
func stateBoxDirs(abs string) []string {
	var out []string
	dirsIn := func(d string) []string {
		ents, _ := os.ReadDir(d)
		var ds []string
		for _, e := range ents {
			if e.IsDir() {
				ds = append(ds, filepath.Join(d, e.Name()))
			}
		}
		return ds
	}
	out = append(out, dirsIn(filepath.Join(abs, "boxes"))...)
	for _, a := range dirsIn(filepath.Join(abs, "accounts")) {
		out = append(out, dirsIn(filepath.Join(a, "boxes"))...)
	}
	return out
}

// removeBoxAsOwner removes box directory dir (removeBoxDir) as the user
// who owns its parts, whoever the records say its user is: when the
// records are lost, the files still tell. Parts of two users, or of
// root's when served by root, are refused.
func removeBoxAsOwner(dir string) error {
	if os.Geteuid() == 0 {
		// A container engine's box keeps its files in the engine's
		// volumes: its parts here are root's and empty, and rmdir
		// removes nothing else (nor follows a link).
		for _, p := range boxParts {
			fi, err := os.Lstat(filepath.Join(dir, p))
			if err == nil && fi.IsDir() {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 {
					os.Remove(filepath.Join(dir, p))
				}
			}
		}
	}
	var u *boxUser
	for _, p := range boxParts {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		if u != nil && u.uid != st.Uid {
			return fmt.Errorf("remove %s: its parts belong to uids %d and %d; look at them as root, then purge again", dir, u.uid, st.Uid)
		}
		u = &boxUser{name: strconv.FormatUint(uint64(st.Uid), 10), uid: st.Uid, gid: st.Gid}
	}
	if u != nil && u.uid == uint32(os.Geteuid()) {
		u = nil // the server's own user's tree (not served by root)
	}
	if u != nil && u.uid == 0 {
		u = nil // removeBoxDir refuses root's box files to root
	}
	if u == nil && os.Geteuid() == 0 {
		// Parts gone (a purge cut short) leave only root's own files.
		if slices.ContainsFunc(boxParts, func(p string) bool { _, err := os.Lstat(filepath.Join(dir, p)); return err == nil }) {
			return removeBoxDir(dir, nil)
		}
		u = nobody
	}
	if err := removeBoxDir(dir, u); err != nil {
		return err
	}
	os.Remove(filepath.Dir(dir)) // an account's boxes/, once empty
	return nil
}

// removeState removes the state directory abs once its boxes are gone:
// only when every entry left is this process's user's (root's, served by
// root), so root removes nothing a box user could have put there.
func removeState(abs string) error {
	me := uint32(os.Geteuid())
	err := filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != me {
			return fmt.Errorf("%s is uid %d's, not the local box's: look at it, remove it by hand, then purge again", p, st.Uid)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.RemoveAll(abs)
}

// readClaims is every claim of the claims directory, by user name.
func readClaims(claims string) map[string]claim {
	out := map[string]claim{}
	ents, _ := os.ReadDir(claims)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		if c, ok := readClaim(claims, e.Name()); ok {
			out[e.Name()] = c
		}
	}
	return out
}

// markedUsers are the Unix users of /etc/passwd (where useradd puts
// them) whose comment says a local box made them (gecosMark), never
// root's uid or gid.
func markedUsers() []machineUser {
	b, _ := os.ReadFile("/etc/passwd")
	var out []machineUser
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Split(l, ":")
		if len(f) < 5 {
			continue
		}
		dir, _, ok := parseMark(f[4])
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if !ok || err1 != nil || err2 != nil || uid == 0 || gid == 0 || !filepath.IsAbs(dir) {
			continue
		}
		out = append(out, machineUser{boxUser: boxUser{name: f[0], uid: uint32(uid), gid: uint32(gid)}, made: true, dir: dir})
	}
	return out
}

// parseMark reads gecosMark's state directory and account back.
func parseMark(gecos string) (dir, account string, ok bool) {
	rest, ok := strings.CutPrefix(gecos, "cocoonbox localbox ")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, " account ")
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+len(" account "):], true
}

// gecosOf is the comment of Unix user name in /etc/passwd, or "".
func gecosOf(name string) string {
	b, _ := os.ReadFile("/etc/passwd")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, ":"); len(f) >= 5 && f[0] == name {
			return f[4]
		}
	}
	return ""
}
