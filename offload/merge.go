package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
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
}

// ErrIndexLocked is a held index.lock: another git is running, and back
// changed nothing.
var ErrIndexLocked = errors.New("another git process holds the index lock")

// errNotApplied is a merge that could not be applied without touching
// what it must not; back then takes the branch.
var errNotApplied = errors.New("the merge does not apply to the work tree")

// BackBranch is the branch name back makes at t.
func BackBranch(t time.Time) string {
	return "cocoonbox/back-" + t.UTC().Format("20060102T150405Z")
}

// mergeBack brings S' (back) home against S (base), for offload id:
// fast-forward when the laptop still equals S; else a clean merge-tree
// applied uncommitted unless it would touch a path the user changed;
// else the branch BackBranch(now) at S'.
func (r *Repo) mergeBack(ctx context.Context, id, base, back string, now time.Time) (*MergeResult, error) {
	g := r.git
	head, err := g.head(ctx)
	if err != nil {
		return nil, err
	}
	baseParent, err := g.line(ctx, "rev-parse", "--verify", base+"^1")
	if err != nil {
		return nil, err
	}
	baseTree, err := g.line(ctx, "rev-parse", "--verify", base+"^{tree}")
	if err != nil {
		return nil, err
	}
	backTree, err := g.line(ctx, "rev-parse", "--verify", back+"^{tree}")
	if err != nil {
		return nil, err
	}
	boxHead, _ := g.line(ctx, "rev-parse", "-q", "--verify", back+"^1")
	if out, err := g.line(ctx, "ls-files", "--unmerged"); err != nil {
		return nil, err
	} else if out != "" {
		return r.branch(ctx, back, now, "the index has unresolved merge conflicts")
	}
	wt, err := r.worktreeTree(ctx)
	if err != nil {
		return nil, err
	}
	// The branch follows the box's commits only from where the box started.
	moveTo := ""
	if head == baseParent && boxHead != "" && boxHead != head {
		if ok, err := g.ok(ctx, "merge-base", "--is-ancestor", head, boxHead); err != nil {
			return nil, err
		} else if ok {
			moveTo = boxHead
		}
	}

	outcome, target := FastForward, backTree
	if head != baseParent || wt != baseTree {
		outcome = Merged
		merged, conflicts, err := r.mergeTrees(ctx, base, wt, backTree)
		if err != nil {
			return nil, err
		}
		if conflicts {
			return r.branch(ctx, back, now, "the box's changes conflict with yours")
		}
		touched, err := r.diffPaths(ctx, wt, merged)
		if err != nil {
			return nil, err
		}
		mine, err := r.changedPaths(ctx)
		if err != nil {
			return nil, err
		}
		if both := intersect(touched, mine); len(both) > 0 {
			return r.branch(ctx, back, now, "the box changed "+pathList(both)+", which you changed too")
		}
		target = merged
	}
	if target == wt && moveTo == "" {
		return &MergeResult{Outcome: UpToDate}, nil
	}
	err = r.apply(ctx, id, head, wt, target, moveTo)
	if errors.Is(err, errNotApplied) {
		return r.branch(ctx, back, now, err.Error())
	}
	if err != nil {
		return nil, err
	}
	return &MergeResult{Outcome: outcome, Head: moveTo}, nil
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
		var ge *GitError
		if errors.As(err, &ge) && exitCode(ge.Err) == 1 {
			return tree, true, nil
		}
		return "", false, err
	}
	return tree, false, nil
}

// diffPaths lists the paths that differ between two trees.
func (r *Repo) diffPaths(ctx context.Context, a, b string) ([]string, error) {
	out, err := r.git.run(ctx, nil, "diff-tree", "-r", "-z", "--name-only", "--no-renames", a, b)
	if err != nil {
		return nil, err
	}
	return nulList(out), nil
}

// changedPaths lists the paths the user changed since HEAD: staged,
// unstaged or untracked (not ignored).
func (r *Repo) changedPaths(ctx context.Context) ([]string, error) {
	out, err := r.git.run(ctx, nil, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		return nil, err
	}
	var ps []string
	for _, e := range nulList(out) {
		if len(e) > 3 {
			ps = append(ps, e[3:])
		}
	}
	return ps, nil
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
	return out
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
	if _, err := r.git.run(ctx, nil, "branch", name, back); err != nil {
		return nil, err
	}
	return &MergeResult{Outcome: Branched, Branch: name, Reason: reason}, nil
}

// apply moves the work tree from tree from to tree to and, when moveTo is
// set, the branch from head to moveTo with a new index: the staged
// changes carried over onto moveTo's tree, else moveTo's tree. The new
// index is built aside and held as index.lock before the work tree
// changes, so a held lock, or a change that does not apply, changes
// nothing. refs/cocoonbox/pre-back/<id> names the old HEAD first.
func (r *Repo) apply(ctx context.Context, id, head, from, to, moveTo string) (err error) {
	lockPath := filepath.Join(r.GitDir, "index.lock")
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, fs.ErrExist) {
		return ErrIndexLocked
	}
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			lock.Close()
			os.Remove(lockPath)
		}
	}()
	if moveTo != "" {
		if err := r.buildIndex(ctx, head, moveTo, lock); err != nil {
			return err
		}
	}
	if _, err := r.git.run(ctx, nil, "update-ref", "-m", "cocoonbox back "+id, RefPreBack+id, head); err != nil {
		return err
	}
	if err := r.checkout(ctx, from, to); err != nil {
		r.git.run(context.WithoutCancel(ctx), nil, "update-ref", "-d", RefPreBack+id)
		return err
	}
	if moveTo == "" {
		return nil
	}
	if _, err := r.git.run(ctx, nil, "update-ref", "-m", "cocoonbox back "+id, "HEAD", moveTo, head); err != nil {
		return fmt.Errorf("the work tree has the box's work, but moving HEAD failed (it was %s): %w", head, err)
	}
	if err := lock.Close(); err != nil {
		return err
	}
	if err := os.Rename(lockPath, filepath.Join(r.GitDir, "index")); err != nil {
		return err
	}
	committed = true
	r.git.run(ctx, nil, "update-index", "-q", "--refresh")
	return nil
}

// buildIndex writes into lock the index for the branch at moveTo: its
// tree plus the staged changes (index against head), when they apply.
func (r *Repo) buildIndex(ctx context.Context, head, moveTo string, lock *os.File) error {
	g, path, cleanup, err := r.tempIndex(ctx, moveTo)
	if err != nil {
		return err
	}
	defer cleanup()
	staged, err := r.git.run(ctx, nil, "diff", "--cached", "--binary", "--no-color", "--no-ext-diff", head)
	if err != nil {
		return err
	}
	if staged != "" {
		if _, err := g.run(ctx, strings.NewReader(staged), "apply", "--cached", "--whitespace=nowarn"); err != nil {
			// They do not apply: the box HEAD's tree it is, and the changes
			// stay in the work tree.
			if _, err := g.run(ctx, nil, "read-tree", moveTo); err != nil {
				return err
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(lock, f); err != nil {
		return err
	}
	return lock.Sync()
}

// checkout changes the work tree from tree from to tree to through a
// temporary index (git read-tree -m -u), which refuses, changing nothing,
// when a file is not as from says or an untracked file is in the way.
func (r *Repo) checkout(ctx context.Context, from, to string) error {
	g, _, cleanup, err := r.tempIndex(ctx, from)
	if err != nil {
		return err
	}
	defer cleanup()
	g.run(ctx, nil, "update-index", "-q", "--refresh")
	if _, err := g.run(ctx, nil, "read-tree", "-m", "-u", from, to); err != nil {
		var ge *GitError
		if errors.As(err, &ge) {
			return fmt.Errorf("%w (%v)", errNotApplied, err)
		}
		return err
	}
	return nil
}
