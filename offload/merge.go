package offload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
	"github.com/cocoonbox/cocoonbox/internal/gitindex"
	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// Outcomes of back's merge (contract "Back, Mac side" 4).
const (
	// FastForward: the laptop still equalled S; the work tree moved to S'.
	FastForward = "fast-forward"
	// Merged: a clean merge of the box's work, applied uncommitted.
	Merged = "merged"
	// Branched: the box's work is on a new branch; the tree is untouched.
	Branched = "branch"
	// UpToDate: the box's work was already here.
	UpToDate = "up-to-date"
)

// RefPreBackWork names a commit of the work tree as back found it (its
// tree as git add -A sees the work tree, its parent the old HEAD). Back
// sets it with RefPreBack before the work tree changes: it is the way
// back from an update that stopped partway.
const RefPreBackWork = "refs/cocoonbox/pre-back-work/"

// MergeResult is what back's merge did.
type MergeResult struct {
	// Outcome is FastForward, Merged, Branched or UpToDate.
	Outcome string
	// Head is the commit the branch moved to; empty when it stayed.
	Head string
	// Branch is the branch made for Branched.
	Branch string
	// Reason says why back took the branch.
	Reason string
	// MergeDone is true when a merge was in progress here, the box
	// committed it, and back ended it (git merge --quit) as HEAD moved
	// to the box's commits.
	MergeDone bool
}

// ErrIndexLocked is a held index.lock: another git is running, and back
// changed nothing.
var ErrIndexLocked = errors.New("another git process holds the index lock")

// errNotApplied is a merge that could not be applied without touching
// what it must not; back then takes the branch.
var errNotApplied = errors.New("the box's work does not apply here")

// BackBranch is the branch name back makes at t.
func BackBranch(t time.Time) string {
	return "cocoonbox/back-" + t.UTC().Format("20060102T150405Z")
}

// backPlan is what back's merge found before it changes anything.
type backPlan struct {
	id      string
	head    string // the laptop's HEAD
	wt      string // the work tree's tree, as git add -A sees it
	target  string // the tree the work tree moves to
	moveTo  string // the commit HEAD moves to, or ""
	outcome string // FastForward or Merged
	// endMerge: a merge is in progress here and moveTo commits it.
	endMerge bool
	// checkout is the index wt was written from, which the work tree
	// update checks the files against.
	checkout git
	// flags are the index's skip-worktree and assume-unchanged paths
	// (indexFlags).
	flags map[string]int
}

// mergeBack brings S' (back) home against S (base), for offload id:
// fast-forward when the laptop still equals S; else a clean merge-tree
// applied uncommitted unless it would touch a path the user changed;
// else the branch BackBranch(now) at S'. Whatever the way, back writes
// over or removes only files of the work tree's tree (tracked, or
// untracked and not ignored) that are as S has them (a fast-forward) or
// as HEAD has them (a merge); an ignored file in the way, a file changed
// or staged since, a file git is told to skip, or an operation in
// progress sends the box's work to the branch. Files S had untracked are
// never removed. The index lock is held from the start, so that the
// index the decisions read is the one that is replaced.
func (r *Repo) mergeBack(ctx context.Context, id, base, back string, now time.Time) (*MergeResult, error) {
	return r.mergeBackHooks(ctx, id, base, back, now, nil)
}

// mergeHooks are the calls back's merge makes as it goes; nil ones are
// not made.
type mergeHooks struct {
	// locked is called once the merge holds the index lock.
	locked func()
	// applying is called with what the work tree update changes once the
	// pre-back refs are set and before any file changes; its error stops
	// the merge with nothing changed.
	applying func(j *MergeJournal) error
}

// mergeBackHooks is mergeBack making the calls of h, when not nil.
func (r *Repo) mergeBackHooks(ctx context.Context, id, base, back string, now time.Time, h *mergeHooks) (*MergeResult, error) {
	if h == nil {
		h = &mergeHooks{}
	}
	lock, err := r.lockIndex()
	if err != nil {
		return nil, err
	}
	defer lock.release()
	if h.locked != nil {
		h.locked()
	}
	rv, err := r.resolveBack(ctx, id, base, back)
	if err != nil {
		return nil, err
	}
	back = rv.back
	var wtIdx wtIndex
	defer wtIdx.release()
	p, reason, err := r.planBack(ctx, id, rv, &wtIdx)
	if err != nil {
		return nil, err
	}
	if reason != "" {
		return r.branch(ctx, back, now, reason)
	}
	if p == nil {
		return &MergeResult{Outcome: UpToDate}, nil
	}
	if p.moveTo != "" {
		err := r.buildIndex(ctx, p.head, p.moveTo, p.flags, lock)
		if errors.Is(err, errNotApplied) && ctx.Err() == nil {
			return r.branch(ctx, back, now, err.Error())
		}
		if err != nil {
			return nil, err
		}
	}
	err = r.apply(ctx, p, lock, h.applying)
	if errors.Is(err, errNotApplied) {
		return r.branch(ctx, back, now, err.Error())
	}
	if err != nil {
		return nil, err
	}
	return &MergeResult{Outcome: p.outcome, Head: p.moveTo, MergeDone: p.endMerge}, nil
}

// backRevs are the commits and trees back's merge starts from.
type backRevs struct {
	back, head       string // S' and the laptop's HEAD
	base, baseParent string // S and its parent
	baseTree         string
	backTree         string
	boxHead          string // S''s parent, the box's HEAD, or ""
	offIndex         string // the tree of the index at offload, or ""
}

// resolveBack resolves, with one git, what the merge of back (S') against
// base (S) for offload id starts from.
func (r *Repo) resolveBack(ctx context.Context, id, base, back string) (*backRevs, error) {
	v, err := r.git.revs(ctx, back+"^{commit}", "HEAD^{commit}", base+"^1", base+"^{tree}", back+"^{tree}", back+"^1", RefIndex+id+"^{tree}")
	if err != nil {
		return nil, err
	}
	rv := &backRevs{back: v[0], head: v[1], base: base, baseParent: v[2], baseTree: v[3], backTree: v[4], boxHead: v[5], offIndex: v[6]}
	switch {
	case rv.back == "":
		return nil, fmt.Errorf("%s is not a commit here", back)
	case rv.head == "":
		_, err := r.git.head(ctx)
		if err == nil {
			err = errors.New("HEAD moved while back read it")
		}
		return nil, err
	case rv.baseParent == "" || rv.baseTree == "":
		return nil, fmt.Errorf("the offload's snapshot %s is not here, or has no parent", base)
	}
	return rv, nil
}

// planBack decides: a plan to apply; a reason to take the branch; or
// neither, when the box's work is here already. The index wt is written
// from goes into wtIdx, which the caller releases.
func (r *Repo) planBack(ctx context.Context, id string, rv *backRevs, wtIdx *wtIndex) (*backPlan, string, error) {
	g := r.git
	head, base, baseParent, baseTree, backTree, boxHead := rv.head, rv.base, rv.baseParent, rv.baseTree, rv.backTree, rv.boxHead
	if unmerged, err := r.hasUnmerged(ctx); err != nil {
		return nil, "", err
	} else if unmerged {
		return nil, "the index has unresolved merge conflicts", nil
	}
	wt, err := r.worktreeIndex(ctx, wtIdx)
	if err != nil {
		return nil, "", err
	}
	// The index as it was at offload tells which of S's files were
	// tracked; without its ref, S's parent does.
	offIndex := rv.offIndex
	if offIndex == "" {
		offIndex = baseParent + "^{tree}"
	}
	theirs, reason, err := r.keepUntracked(ctx, baseTree, backTree, offIndex)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	p := &backPlan{id: id, head: head, wt: wt, outcome: FastForward, target: theirs, checkout: wtIdx.g}
	// The branch follows the box's commits only from where the box started.
	if head == baseParent && boxHead != "" && boxHead != head {
		if ok, err := g.ok(ctx, "merge-base", "--is-ancestor", head, boxHead); err != nil {
			return nil, "", err
		} else if ok {
			p.moveTo = boxHead
		}
	}
	if head != baseParent || wt != baseTree {
		p.outcome = Merged
		merged, conflicts, err := r.mergeTrees(ctx, base, wt, theirs)
		if err != nil {
			return nil, "", err
		}
		if conflicts {
			return nil, "the box's changes conflict with yours", nil
		}
		touched, err := r.diffPaths(ctx, wt, merged)
		if err != nil {
			return nil, "", err
		}
		mine, err := r.changedPaths(ctx, head, wt)
		if err != nil {
			return nil, "", err
		}
		if both := intersect(touched, mine); len(both) > 0 {
			return nil, "the box changed " + pathList(both) + ", which you changed too", nil
		}
		p.target = merged
	}
	if p.target == wt && p.moveTo == "" {
		return nil, "", nil
	}
	reason, err = r.guard(ctx, p, offIndex)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	return p, "", nil
}

// guard finds what the plan must not touch: an operation git stopped in
// the middle of; a path the work tree update would change that git skips
// here (skip-worktree, assume-unchanged); a file or directory in the way
// of one it would write that is not in the work tree's tree (ignored,
// or something git cannot add); an index entry the branch move would
// replace that the user staged since the offload. It returns the reason
// to take the branch, or "".
func (r *Repo) guard(ctx context.Context, p *backPlan, offIndex string) (string, error) {
	if op := r.inProgress(); op == "a merge" && p.moveTo != "" {
		heads, err := r.mergeHeads()
		if err != nil {
			return "", err
		}
		for _, h := range heads {
			ok, err := r.git.ok(ctx, "merge-base", "--is-ancestor", h, p.moveTo)
			if err != nil {
				return "", err
			}
			if !ok {
				return "a merge is in progress here and the box's commits do not include it", nil
			}
		}
		p.endMerge = true
	} else if op != "" {
		return op + " is in progress here", nil
	}

	changed, err := r.diffPaths(ctx, p.wt, p.target)
	if err != nil {
		return "", err
	}
	if p.flags, err = r.indexFlags(ctx); err != nil {
		return "", err
	}
	var skipped []string
	for _, path := range changed {
		if p.flags[path] != 0 {
			skipped = append(skipped, path)
		}
	}
	if len(skipped) > 0 {
		return "the box changed " + pathList(skipped) + ", which git here is told to skip (skip-worktree or assume-unchanged)", nil
	}
	inWay, err := r.inTheWay(ctx, p.wt, changed)
	if err != nil {
		return "", err
	}
	if len(inWay) > 0 {
		return "the box's work would overwrite " + pathList(inWay) + ", which git here ignores or does not track; git merge would too, so keep a copy first", nil
	}

	if p.moveTo == "" {
		return "", nil
	}
	moved, err := r.diffPaths(ctx, p.head, p.moveTo)
	if err != nil {
		return "", err
	}
	out, err := r.git.run(ctx, nil, "diff-index", "--cached", "-z", "--name-only", "--no-renames", "--ita-invisible-in-index", offIndex)
	if err != nil {
		return "", err
	}
	staged := intersect(moved, nulList(out))
	if len(staged) == 0 {
		return "", nil
	}
	// Staged as the box committed it: nothing of the user's is replaced.
	out, err = r.git.run(ctx, nil, "diff-index", "--cached", "-z", "--name-only", "--no-renames", "--ita-invisible-in-index", p.moveTo)
	if err != nil {
		return "", err
	}
	if both := intersect(staged, nulList(out)); len(both) > 0 {
		return "the box's commits change " + pathList(both) + ", which you staged since the offload", nil
	}
	return "", nil
}

// inProgress names the operation git stopped in the middle of here, from
// its state files, or "".
func (r *Repo) inProgress() string {
	for _, s := range []struct{ file, op string }{
		{"rebase-merge", "a rebase"},
		{"rebase-apply", "a rebase or git am"},
		{"CHERRY_PICK_HEAD", "a cherry-pick"},
		{"REVERT_HEAD", "a revert"},
		{"sequencer", "a cherry-pick or revert"},
		{"MERGE_HEAD", "a merge"},
	} {
		if _, err := os.Lstat(filepath.Join(r.GitDir, s.file)); err == nil {
			return s.op
		}
	}
	return ""
}

// mergeHeads reads MERGE_HEAD: the commits being merged.
func (r *Repo) mergeHeads() ([]string, error) {
	b, err := os.ReadFile(filepath.Join(r.GitDir, "MERGE_HEAD"))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// Index entry flags as indexFlags reports them.
const (
	flagSkipWorktree = 1 << iota
	flagAssumeUnchanged
)

// indexFlags maps the index's paths that have skip-worktree or
// assume-unchanged set to those flags (git ls-files -t -v: S for
// skip-worktree, a lower-case tag for assume-unchanged).
func (r *Repo) indexFlags(ctx context.Context) (map[string]int, error) {
	if ix, ok := readIndex(r.indexPath()); ok {
		return indexFlagsOf(ix), nil
	}
	return r.indexFlagsGit(ctx)
}

// indexFlagsGit is indexFlags read by git ls-files -t -v.
func (r *Repo) indexFlagsGit(ctx context.Context) (map[string]int, error) {
	out, err := r.git.run(ctx, nil, "ls-files", "-z", "-t", "-v")
	if err != nil {
		return nil, err
	}
	flags := map[string]int{}
	for _, e := range nulList(out) {
		if len(e) < 3 {
			continue
		}
		tag, path := e[0], e[2:]
		f := 0
		if tag == 'S' || tag == 's' {
			f |= flagSkipWorktree
		}
		if tag >= 'a' && tag <= 'z' {
			f |= flagAssumeUnchanged
		}
		if f != 0 {
			flags[path] = f
		}
	}
	return flags, nil
}

// inTheWay returns the paths of the work tree, not in tree wt, that
// writing paths (those the update changes) would overwrite or remove: a
// file, symlink or non-empty directory where a path is to be written, or
// a file or symlink where a directory above one is to be. The files of wt
// are git's to change: the plan's checks cover them.
func (r *Repo) inTheWay(ctx context.Context, wt string, paths []string) ([]string, error) {
	out, err := r.git.run(ctx, nil, "ls-tree", "-r", "-z", "--name-only", wt)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, p := range nulList(out) {
		have[p] = true
	}
	var found []string
	for _, p := range paths {
		if have[p] {
			continue
		}
		if q, err := r.blocker(p, have); err != nil {
			return nil, err
		} else if q != "" {
			found = append(found, q)
		}
	}
	slices.Sort(found)
	return slices.Compact(found), nil
}

// blocker returns what here would be lost if git wrote path p, which the
// work tree's tree has not (have lists its files), or "".
func (r *Repo) blocker(p string, have map[string]bool) (string, error) {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		fi, err := os.Lstat(filepath.Join(r.Top, filepath.FromSlash(dir)))
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if fi.IsDir() {
			continue
		}
		if have[dir] {
			return "", nil // a file of the tree, which the update replaces
		}
		return dir, nil
	}
	full := filepath.Join(r.Top, filepath.FromSlash(p))
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return p, nil
	}
	found := ""
	err = filepath.WalkDir(full, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(r.Top, q)
		if rel = filepath.ToSlash(rel); !have[rel] {
			found = rel
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
}

// keepUntracked returns the box's tree with the files put back that S
// holds, that were untracked here at offload (not in the tree offIndex),
// and that S' has not: the box ignores or removed them, and back never
// removes a file git did not track. It returns a reason to take the
// branch when the box's tree has no room for them.
func (r *Repo) keepUntracked(ctx context.Context, baseTree, backTree, offIndex string) (string, string, error) {
	out, err := r.git.run(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", "--diff-filter=D", baseTree, backTree)
	if err != nil {
		return "", "", err
	}
	dropped := parseRaw(out)
	if len(dropped) == 0 {
		return backTree, "", nil
	}
	out, err = r.git.run(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", "--name-only", "--diff-filter=A", offIndex, baseTree)
	if err != nil {
		return "", "", err
	}
	untracked := map[string]bool{}
	for _, p := range nulList(out) {
		untracked[p] = true
	}
	var in strings.Builder
	var keep []string
	for _, c := range dropped {
		if untracked[c.path] {
			fmt.Fprintf(&in, "%s %s\t%s\x00", c.srcMode, c.src, c.path)
			keep = append(keep, c.path)
		}
	}
	if len(keep) == 0 {
		return backTree, "", nil
	}
	g, _, cleanup, err := r.tempIndex(ctx, backTree)
	if err != nil {
		return "", "", err
	}
	defer cleanup()
	if _, err := g.run(ctx, strings.NewReader(in.String()), "update-index", "-z", "--add", "--index-info"); err != nil {
		return "", "", err
	}
	tree, err := g.line(ctx, "write-tree")
	if err != nil {
		return "", "", err
	}
	// --index-info drops an entry in the way of a directory, and back.
	added, err := r.diffPaths(ctx, backTree, tree)
	if err != nil {
		return "", "", err
	}
	slices.Sort(keep)
	if !slices.Equal(added, keep) {
		return "", "the box's work puts files where you have untracked " + pathList(keep), nil
	}
	return tree, "", nil
}

// rawChange is one line of git diff-tree's raw output.
type rawChange struct {
	srcMode, dstMode, src, dst, path string
}

// parseRaw parses diff-tree -r -z raw output, renames off.
func parseRaw(out string) []rawChange {
	f := nulList(out)
	var cs []rawChange
	for i := 0; i+1 < len(f); i += 2 {
		h := strings.Fields(strings.TrimPrefix(f[i], ":"))
		if len(h) < 5 {
			continue
		}
		cs = append(cs, rawChange{srcMode: h[0], dstMode: h[1], src: h[2], dst: h[3], path: f[i+1]})
	}
	return cs
}

// mergeTrees merges theirs into ours against base with git merge-tree
// --write-tree. Git before 2.40 takes no --merge-base, so both trees get
// a commit whose parent is base, making base their merge base.
func (r *Repo) mergeTrees(ctx context.Context, base, ours, theirs string) (string, bool, error) {
	g := r.git.with(snapshotIdent...)
	var cs [2]string
	for i, t := range []string{ours, theirs} {
		c, err := g.line(ctx, "commit-tree", t, "-p", base, "-m", "cocoonbox back: merge side")
		if err != nil {
			return "", false, err
		}
		cs[i] = c
	}
	out, err := g.run(ctx, nil, "merge-tree", "--write-tree", "--no-messages", cs[0], cs[1])
	tree, _, _ := strings.Cut(out, "\n")
	if err != nil {
		var ge *gitcmd.Error
		if errors.As(err, &ge) && exitCode(ge.Err) == 1 {
			return tree, true, nil
		}
		return "", false, err
	}
	return tree, false, nil
}

// diffPaths lists, sorted, the paths that differ between two tree-ishes.
func (r *Repo) diffPaths(ctx context.Context, a, b string) ([]string, error) {
	out, err := r.git.run(ctx, nil, "diff-tree", "-r", "-z", "--name-only", "--no-renames", a, b)
	if err != nil {
		return nil, err
	}
	ps := nulList(out)
	slices.Sort(ps)
	return ps, nil
}

// changedPaths lists the paths the user changed since HEAD: in the work
// tree (wt, untracked files included) or staged.
func (r *Repo) changedPaths(ctx context.Context, head, wt string) ([]string, error) {
	ps, err := r.diffPaths(ctx, head, wt)
	if err != nil {
		return nil, err
	}
	out, err := r.git.run(ctx, nil, "diff-index", "--cached", "-z", "--name-only", "--no-renames", head)
	if err != nil {
		return nil, err
	}
	ps = append(ps, nulList(out)...)
	slices.Sort(ps)
	return slices.Compact(ps), nil
}

func intersect(a, b []string) []string {
	set := map[string]bool{}
	for _, p := range b {
		set[p] = true
	}
	var out []string
	for _, p := range a {
		if set[p] {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func pathList(ps []string) string {
	if len(ps) > 3 {
		return strings.Join(ps[:3], ", ") + fmt.Sprintf(" and %d more", len(ps)-3)
	}
	return strings.Join(ps, ", ")
}

// branch makes BackBranch(now) at back and leaves everything else alone.
func (r *Repo) branch(ctx context.Context, back string, now time.Time, reason string) (*MergeResult, error) {
	name := BackBranch(now)
	if _, err := r.git.run(ctx, nil, "update-ref", "-m", "cocoonbox back", "refs/heads/"+name, back, ""); err != nil {
		return nil, err
	}
	return &MergeResult{Outcome: Branched, Branch: name, Reason: reason}, nil
}

// indexLock is git's index.lock, held by back. mark is a hard link to it
// named for back's pid, so that the next back knows a lock its own dead
// run left (staleLock).
type indexLock struct {
	path, mark string
	f          *os.File
	done       bool
}

// lockMarkPrefix begins the name of an index lock's mark, beside it:
// index.lock.cocoonbox-PID.
const lockMarkPrefix = ".cocoonbox-"

// lockIndex takes index.lock as git does (O_EXCL), or ErrIndexLocked. A
// lock that a back of ours left when it died (kill -9 in its merge) is
// removed first: its mark names a pid that no longer runs and is the same
// file (staleLock).
func (r *Repo) lockIndex() (*indexLock, error) {
	path := filepath.Join(r.GitDir, "index.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, fs.ErrExist) && staleLock(path) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	}
	if errors.Is(err, fs.ErrExist) {
		return nil, ErrIndexLocked
	}
	if err != nil {
		return nil, err
	}
	mark := path + lockMarkPrefix + strconv.Itoa(os.Getpid())
	os.Remove(mark)
	if os.Link(path, mark) != nil {
		mark = ""
	}
	return &indexLock{path: path, mark: mark, f: f}, nil
}

// indexLocked reports whether a lock is on the index now (git's, or one
// a back of ours left, which lockIndex removes).
func (r *Repo) indexLocked() bool {
	_, err := os.Lstat(filepath.Join(r.GitDir, "index.lock"))
	return err == nil
}

// staleLock removes the index lock at path when a back of ours left it
// (ownStaleLock). A lock git or another program holds has no such mark,
// and stays. Marks of dead backs are removed. It reports whether it
// removed the lock.
func staleLock(path string) bool {
	removed := ownStaleLock(path) && os.Remove(path) == nil
	for _, m := range deadMarks(path) {
		os.Remove(m)
	}
	return removed
}

// ownStaleLock reports whether the index lock at path is one a back of
// ours left when it died: a mark beside it names a pid that no longer
// runs and is a link to the same file.
func ownStaleLock(path string) bool {
	lock, err := os.Lstat(path)
	if err != nil {
		return false
	}
	for _, m := range deadMarks(path) {
		if mfi, err := os.Lstat(m); err == nil && os.SameFile(lock, mfi) {
			return true
		}
	}
	return false
}

// deadMarks are the marks beside the index lock at path that name a pid
// that no longer runs.
func deadMarks(path string) []string {
	marks, _ := filepath.Glob(path + lockMarkPrefix + "*")
	var dead []string
	for _, m := range marks {
		pid, err := strconv.Atoi(strings.TrimPrefix(m, path+lockMarkPrefix))
		if err == nil && pid > 0 && !proc.Alive(pid) {
			dead = append(dead, m)
		}
	}
	return dead
}

// hold copies the index file src into the lock, keeping src's
// modification time, which git compares with its entries' (racy git).
func (l *indexLock) hold(src string) error {
	b, mtime, err := gitindex.ReadBytes(src)
	if err != nil {
		return err
	}
	if _, err := l.f.Write(b); err != nil {
		return err
	}
	if err := l.f.Sync(); err != nil {
		return err
	}
	return os.Chtimes(l.path, mtime, mtime)
}

// commit makes the lock the index.
func (l *indexLock) commit() error {
	if err := l.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(l.path, filepath.Join(filepath.Dir(l.path), "index")); err != nil {
		return err
	}
	l.unmark()
	l.done = true
	return nil
}

// release drops the lock unless it became the index.
func (l *indexLock) release() {
	if !l.done {
		l.f.Close()
		os.Remove(l.path)
		l.unmark()
		l.done = true
	}
}

// unmark removes the lock's mark.
func (l *indexLock) unmark() {
	if l.mark != "" {
		os.Remove(l.mark)
	}
}

// buildIndex builds aside, and holds in lock, the index for HEAD at
// moveTo: a copy of the index in which the entries of the paths that
// moveTo changes from head become moveTo's, keeping their skip-worktree
// and assume-unchanged flags, and every other entry stays as it is:
// flags, intent-to-add and staged changes included. A staged change of a
// path the box's commits changed is in them (the box's copy had the
// index), and refs/cocoonbox/index/<id> keeps it. errNotApplied when an
// entry could not be kept. flags are the index's (indexFlags).
func (r *Repo) buildIndex(ctx context.Context, head, moveTo string, flags map[string]int, lock *indexLock) error {
	g, path, cleanup, err := r.tempIndex(ctx, "")
	if err != nil {
		return err
	}
	defer cleanup()
	out, err := r.git.run(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", head, moveTo)
	if err != nil {
		return err
	}
	changes := parseRaw(out)
	before, err := stages(ctx, g, path)
	if err != nil {
		return err
	}
	want := maps.Clone(before)
	var in strings.Builder
	var skip, assume strings.Builder
	for _, c := range changes {
		if strings.Trim(c.dstMode, "0") == "" {
			fmt.Fprintf(&in, "0 %s\t%s\x00", c.src, c.path)
			delete(want, c.path)
			continue
		}
		fmt.Fprintf(&in, "%s %s\t%s\x00", c.dstMode, c.dst, c.path)
		want[c.path] = c.dstMode + " " + c.dst + " 0"
		if flags[c.path]&flagSkipWorktree != 0 {
			skip.WriteString(c.path + "\x00")
		}
		if flags[c.path]&flagAssumeUnchanged != 0 {
			assume.WriteString(c.path + "\x00")
		}
	}
	if _, err := g.run(ctx, strings.NewReader(in.String()), "update-index", "-z", "--index-info"); err != nil {
		return fmt.Errorf("%w: %v", errNotApplied, err)
	}
	after, err := stages(ctx, g, path)
	if err != nil {
		return err
	}
	if !maps.Equal(want, after) {
		var lost []string
		for _, m := range []map[string]string{want, after} {
			for p := range m {
				if want[p] != after[p] {
					lost = append(lost, p)
				}
			}
		}
		slices.Sort(lost)
		return fmt.Errorf("%w: the index entry of %s cannot stay beside the box's commits", errNotApplied, lost[0])
	}
	for _, f := range []struct{ opt, paths string }{{"--skip-worktree", skip.String()}, {"--assume-unchanged", assume.String()}} {
		if f.paths == "" {
			continue
		}
		if _, err := g.run(ctx, strings.NewReader(f.paths), "update-index", "-z", f.opt, "--stdin"); err != nil {
			return err
		}
	}
	return lock.hold(path)
}

// stages maps each path of g's index, the file at path, to "mode oid
// stage".
func stages(ctx context.Context, g git, path string) (map[string]string, error) {
	if ix, ok := readIndex(path); ok {
		return stagesOf(ix), nil
	}
	return stagesGit(ctx, g)
}

// stagesGit is stages read by git ls-files -s.
func stagesGit(ctx context.Context, g git) (map[string]string, error) {
	out, err := g.run(ctx, nil, "ls-files", "-s", "-z")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, e := range nulList(out) {
		if info, path, ok := strings.Cut(e, "\t"); ok {
			m[path] = info
		}
	}
	return m, nil
}

// apply carries out the plan: refs/cocoonbox/pre-back/<id> names the old
// HEAD and RefPreBackWork<id> the work tree; the work tree moves from wt
// to target; with moveTo, HEAD moves there, the index held in lock
// becomes the index, and a merge in progress that moveTo committed ends.
// From the work tree's first change on, SIGINT, SIGTERM and SIGHUP wait
// and the gits run in their own process group, out of the terminal's
// reach, as an update cut short would read as changes of the user's. A
// failure before any file changed is errNotApplied; after, an *Error
// that says where everything is.
//
// The update checks the files against p.checkout, the index wt was
// written from: git add -A left in it the stat data of the files as it
// found them, and it re-read what it did not trust (a racily clean entry
// of the real index), so git trusts in it what it would trust in the real
// index, and hashes only what changed since.
func (r *Repo) apply(ctx context.Context, p *backPlan, lock *indexLock, applying func(*MergeJournal) error) error {
	g := p.checkout
	work, err := r.git.with(snapshotIdent...).line(ctx, "commit-tree", p.wt, "-p", p.head, "-m", "cocoonbox back "+p.id+": the work tree back found")
	if err != nil {
		return err
	}
	for ref, oid := range map[string]string{RefPreBack + p.id: p.head, RefPreBackWork + p.id: work} {
		if _, err := r.git.run(ctx, nil, "update-ref", "-m", "cocoonbox back "+p.id, ref, oid); err != nil {
			return err
		}
	}
	if applying != nil {
		j := &MergeJournal{Head: p.head, MoveTo: p.moveTo, Work: work, Target: p.target, EndMerge: p.endMerge, Outcome: p.outcome}
		if err := applying(j); err != nil {
			return err
		}
	}

	release := holdSignals()
	defer release()
	hold := context.WithoutCancel(ctx)
	if _, err := g.detached().run(hold, nil, "-c", "core.sparseCheckout=false", "read-tree", "-m", "-u", "--no-recurse-submodules", p.wt, p.target); err != nil {
		if now, terr := r.worktreeTree(hold); terr == nil && now == p.wt {
			r.git.run(hold, nil, "update-ref", "-d", RefPreBack+p.id)
			r.git.run(hold, nil, "update-ref", "-d", RefPreBackWork+p.id)
			return fmt.Errorf("%w (%v)", errNotApplied, err)
		}
		return &Error{Code: ExitFailed,
			Err: fmt.Errorf("the work tree update stopped partway, so some files are the box's and the rest as they were: %w", err),
			Next: []Step{
				{"HEAD and the index are as before back (HEAD is " + RefPreBack + p.id + ")"},
				{"to put your files back: git restore --source=" + RefPreBackWork + p.id + " --worktree -- :/"},
				{"(files that only the box added stay, untracked); then run ", cmdBack, " again"},
			}}
	}
	if p.moveTo == "" {
		return nil
	}
	d := r.git.detached()
	if _, err := d.run(hold, nil, "update-ref", "-m", "cocoonbox back "+p.id, "HEAD", p.moveTo, p.head); err != nil {
		return &Error{Code: ExitFailed,
			Err:  fmt.Errorf("the work tree has the box's work, but moving HEAD to the box's %s failed: %w", p.moveTo, err),
			Next: []Step{{"the box's changes show as uncommitted changes; HEAD and the index are as before back (" + RefPreBack + p.id + ")"}}}
	}
	if err := lock.commit(); err != nil {
		return &Error{Code: ExitFailed,
			Err:  fmt.Errorf("HEAD is at the box's %s, but writing the index failed: %w", p.moveTo, err),
			Next: []Step{{"the index is the old one: git status shows the box's commits as undone; git reset -q brings the index to HEAD"}}}
	}
	if p.endMerge {
		if _, err := d.run(hold, nil, "merge", "--quit"); err != nil {
			return &Error{Code: ExitFailed,
				Err:  fmt.Errorf("HEAD is at the box's %s, which commits the merge in progress here, but ending that merge failed: %w", p.moveTo, err),
				Next: []Step{{"run git merge --quit (not --abort, which would undo the box's work)"}}}
		}
	}
	d.run(hold, nil, "update-index", "-q", "--refresh")
	return nil
}

// detached returns g running each git in a process group of its own
// (the command's children's, when g has one), out of reach of the
// terminal's Ctrl-C, and never prompting: a git that would ask for
// credentials (a smudge filter fetching a file) fails rather than stop
// in the background.
func (g git) detached() git {
	d := g.with("GIT_TERMINAL_PROMPT=0")
	if d.prep == nil {
		d.prep = proc.NewGroup
	}
	return d
}

// holdSignals keeps SIGINT, SIGTERM and SIGHUP from ending the process
// until release; a caller's signal.NotifyContext still sees them.
func holdSignals() (release func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	return func() { signal.Stop(c) }
}
