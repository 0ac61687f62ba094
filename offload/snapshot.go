package offload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// Refs offload and back keep in the laptop repository, per offload id.
const (
	// RefOffload names S, the work tree as the box starts from it: a
	// commit whose parent is HEAD and whose tree is the work tree,
	// uncommitted and untracked files included, ignored files not.
	RefOffload = "refs/cocoonbox/offload/"
	// RefIndex names a commit of the index at offload time, so the
	// objects of staged changes travel in the bundle.
	RefIndex = "refs/cocoonbox/index/"
	// RefBack names S', the box's work tree as the box agent left it,
	// whose first parent is the box's HEAD.
	RefBack = "refs/cocoonbox/back/"
	// RefPreBack names the laptop's HEAD before back moved the branch.
	RefPreBack = "refs/cocoonbox/pre-back/"
	// RefBox is where back fetches the box copy's branches.
	RefBox = "refs/cocoonbox/box/"
)

// snapshotIdent is the author of the synthetic commits offload makes, so
// that a laptop without a git identity can offload.
var snapshotIdent = []string{
	"GIT_AUTHOR_NAME=cocoonbox", "GIT_AUTHOR_EMAIL=cocoonbox@localhost",
	"GIT_COMMITTER_NAME=cocoonbox", "GIT_COMMITTER_EMAIL=cocoonbox@localhost",
}

// NewID returns a fresh offload id: 16 hex digits.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errNoCommit is a repository whose HEAD names no commit yet.
var errNoCommit = errors.New("the repository has no commit yet")

// head returns HEAD's commit, or errNoCommit.
func (g git) head(ctx context.Context) (string, error) {
	out, err := g.line(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil {
		if _, err2 := g.line(ctx, "rev-parse", "--git-dir"); err2 == nil {
			return "", errNoCommit
		}
		return "", err
	}
	return out, nil
}

// tempIndex copies the repo's index (or HEAD's tree when there is none)
// to a temporary file in the git directory and returns git with
// GIT_INDEX_FILE set to it, its path, and a func that removes it. With
// from set, it holds that tree instead. The real index is never written.
//
// The copy keeps the index file's modification time: git trusts an
// entry's stat data only when the entry is older than the index file, and
// re-reads a "racily clean" one. A copy with a fresh time would make a
// same-size edit in the second of the last index write look unchanged.
func (r *Repo) tempIndex(ctx context.Context, from string) (git, string, func(), error) {
	f, err := os.CreateTemp(r.GitDir, "cocoonbox-index-*")
	if err != nil {
		return git{}, "", nil, err
	}
	name := f.Name()
	cleanup := func() { os.Remove(name); os.Remove(name + ".lock") }
	g := r.git.with("GIT_INDEX_FILE=" + name)
	if from == "" {
		var mtime time.Time
		src, err := os.Open(filepath.Join(r.GitDir, "index"))
		if err == nil {
			var fi os.FileInfo
			if fi, err = src.Stat(); err == nil {
				mtime = fi.ModTime()
				_, err = io.Copy(f, src)
			}
			src.Close()
		} else if errors.Is(err, fs.ErrNotExist) {
			err = nil
			from = "HEAD"
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && !mtime.IsZero() {
			err = os.Chtimes(name, mtime, mtime)
		}
		if err != nil {
			cleanup()
			return git{}, "", nil, err
		}
	} else {
		f.Close()
	}
	if from != "" {
		os.Remove(name) // read-tree wants to write it anew
		if _, err := g.run(ctx, nil, "read-tree", from); err != nil {
			cleanup()
			return git{}, "", nil, err
		}
	}
	return g, name, cleanup, nil
}

// worktreeTree writes the tree of the work tree as offload sends it:
// tracked and untracked files, not ignored ones. It starts from the index
// so that nothing is re-hashed that need not be.
func (r *Repo) worktreeTree(ctx context.Context) (string, error) {
	var w wtIndex
	defer w.release()
	return r.worktreeIndex(ctx, &w)
}

// wtIndex is the temporary index a work tree's tree was written from: its
// entries are that tree's, with the stat data git add -A found in the
// work tree, so git can check the files against it without hashing them.
type wtIndex struct {
	g       git // git with GIT_INDEX_FILE set to it
	cleanup func()
}

// release removes the index, if one was made.
func (w *wtIndex) release() {
	if w.cleanup != nil {
		w.cleanup()
		w.cleanup = nil
	}
}

// worktreeIndex is worktreeTree, keeping the index the tree was written
// from in w, which the caller releases (also on an error).
func (r *Repo) worktreeIndex(ctx context.Context, w *wtIndex) (string, error) {
	g, _, cleanup, err := r.tempIndex(ctx, "")
	if err != nil {
		return "", err
	}
	w.g, w.cleanup = g, cleanup
	if _, err := g.run(ctx, nil, "add", "-A", "--", "."); err != nil {
		return "", err
	}
	return g.line(ctx, "write-tree")
}

// snapshotReady refuses a repository S cannot be made of: no commit yet,
// or unresolved conflicts in the index.
func (r *Repo) snapshotReady(ctx context.Context) error {
	if _, err := r.git.head(ctx); errors.Is(err, errNoCommit) {
		return refused(err, Step{"commit once, then offload"})
	} else if err != nil {
		return err
	}
	if unmerged, err := r.hasUnmerged(ctx); err != nil {
		return err
	} else if unmerged {
		return refused(errConflicts, Step{"resolve them, then offload"})
	}
	return nil
}

// snapshot makes S and the index commit for offload id, sets RefOffload
// and RefIndex to them, and returns S.
func (r *Repo) snapshot(ctx context.Context, id string) (string, error) {
	head, err := r.git.head(ctx)
	if err != nil {
		return "", err
	}
	if unmerged, err := r.hasUnmerged(ctx); err != nil {
		return "", err
	} else if unmerged {
		return "", errConflicts
	}
	ig, _, cleanup, err := r.tempIndex(ctx, "")
	if err != nil {
		return "", err
	}
	indexTree, err := ig.line(ctx, "write-tree")
	cleanup()
	if err != nil {
		return "", err
	}
	tree, err := r.worktreeTree(ctx)
	if err != nil {
		return "", err
	}
	g := r.git.with(snapshotIdent...)
	s, err := g.line(ctx, "commit-tree", tree, "-p", head, "-m", "cocoonbox offload "+id+": the work tree the box starts from")
	if err != nil {
		return "", err
	}
	ic, err := g.line(ctx, "commit-tree", indexTree, "-p", head, "-m", "cocoonbox offload "+id+": the index")
	if err != nil {
		return "", err
	}
	// Both refs in one git, as one transaction.
	refs := "update " + RefOffload + id + " " + s + "\nupdate " + RefIndex + id + " " + ic + "\n"
	if _, err := r.git.run(ctx, strings.NewReader(refs), "update-ref", "--stdin"); err != nil {
		return "", err
	}
	return s, nil
}

var errConflicts = errors.New("the index has unresolved merge conflicts")

// dropRefs deletes the refs of offload id that offload made.
func (r *Repo) dropRefs(ctx context.Context, id string) {
	// One git for both (a ref that is not there deletes as one that is);
	// should the pair fail as one transaction, each goes on its own.
	refs := "delete " + RefOffload + id + "\ndelete " + RefIndex + id + "\n"
	if _, err := r.git.run(ctx, strings.NewReader(refs), "update-ref", "--stdin"); err != nil {
		r.git.run(ctx, nil, "update-ref", "-d", RefOffload+id)
		r.git.run(ctx, nil, "update-ref", "-d", RefIndex+id)
	}
}

// have returns which of oids name objects in this repository.
func (r *Repo) have(ctx context.Context, oids []string) ([]string, error) {
	if len(oids) == 0 {
		return nil, nil
	}
	out, err := r.git.run(ctx, strings.NewReader(strings.Join(oids, "\n")+"\n"), "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return nil, err
	}
	var have []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" && !strings.HasSuffix(l, " missing") {
			have = append(have, l)
		}
	}
	return have, nil
}

// bundle writes the objects the box lacks to path: git bundle create
// --all --not every oid of boxRefs this repository has. It returns false
// when git refuses the bundle as empty, and leaves no file then. The
// other worktrees' HEADs, which --all lists as main-worktree/HEAD and
// worktrees/<name>/HEAD, are left out: they are no refs of the copy.
func (r *Repo) bundle(ctx context.Context, path string, boxRefs map[string]string) (bool, error) {
	oids := make([]string, 0, len(boxRefs))
	for _, oid := range boxRefs {
		if isOID(oid) {
			oids = append(oids, oid)
		}
	}
	have, err := r.have(ctx, oids)
	if err != nil {
		return false, err
	}
	var not strings.Builder
	for _, oid := range have {
		fmt.Fprintf(&not, "^%s\n", oid)
	}
	// git would write path itself with the umask's mode (0644, often),
	// through path.lock: it writes stdout instead, into a file made 0600.
	os.Remove(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, err
	}
	err = r.git.runTo(ctx, strings.NewReader(not.String()), f, "bundle", "create", "-q", "-",
		"--exclude=main-worktree/*", "--exclude=worktrees/*", "--all", "--stdin")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var ge *gitcmd.Error
	if errors.As(err, &ge) && strings.Contains(ge.Stderr, "empty bundle") {
		os.Remove(path)
		return false, nil
	}
	if err != nil {
		os.Remove(path)
		return false, err
	}
	return true, nil
}

func isOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// plainObjects says whether the repository's objects are all its own, in
// .git/objects of the work tree's top, so that rsync can carry them as
// they are: a .git directory (no linked worktree) with no alternates.
func (r *Repo) plainObjects() bool {
	if r.Linked {
		return false
	}
	gd := filepath.Join(r.Top, ".git")
	if fi, err := os.Lstat(gd); err != nil || !fi.IsDir() {
		return false
	}
	for _, f := range []string{"alternates", "http-alternates"} {
		if _, err := os.Lstat(filepath.Join(gd, "objects", "info", f)); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return true
}

// refs maps each ref of the repository to the oid it names.
func (r *Repo) refs(ctx context.Context) (map[string]string, error) {
	out, err := r.git.run(ctx, nil, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if oid, name, ok := strings.Cut(l, " "); ok {
			m[name] = oid
		}
	}
	return m, nil
}
