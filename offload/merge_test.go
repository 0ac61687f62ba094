package offload

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testID = "0123456789abcdef"

var backTime = time.Date(2026, 11, 3, 14, 5, 9, 0, time.UTC)

// offloadTo snapshots the laptop repo and makes a box copy of it, as
// offload and the box's send would: HEAD at S's parent, files as S.
func offloadTo(t *testing.T, env []string, r *Repo) (s string, boxRepo *Repo) {
	t.Helper()
	s, err := r.snapshot(context.Background(), testID)
	if err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(t.TempDir(), "box")
	run(t, r.Top, env, "git", "clone", "-q", r.Top, b)
	run(t, b, env, "git", "fetch", "-q", "origin", RefOffload+testID+":"+RefOffload+testID)
	run(t, b, env, "git", "read-tree", "-u", "--reset", s)
	run(t, b, env, "git", "reset", "-q")
	br, err := OpenRepo(context.Background(), b, env)
	if err != nil {
		t.Fatal(err)
	}
	return s, br
}

// boxBack makes S' in the box copy, as post --back does, and fetches it
// and the box's branches into the laptop repo, as back does.
func boxBack(t *testing.T, env []string, r, br *Repo) string {
	t.Helper()
	tree, err := br.worktreeTree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sp := run(t, br.Top, append(env, snapshotIdent...), "git", "commit-tree", tree, "-p", "HEAD", "-m", "S'")
	run(t, br.Top, env, "git", "update-ref", RefBack+testID, sp)
	run(t, r.Top, env, "git", "fetch", "-q", br.Top, "+refs/heads/*:"+RefBox+"*", "+"+RefBack+testID+":"+RefBack+testID)
	return sp
}

// files maps every work tree path but .git's to its mode and content.
func files(t *testing.T, top string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, p)
		m[filepath.ToSlash(rel)] = fi.Mode().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBackFastForward(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{".gitignore": "*.log\n", "a.txt": "a\n", "b.txt": "b\n"})
	head := run(t, r.Top, env, "git", "rev-parse", "HEAD")
	// Uncommitted and untracked work travels; the box commits on top.
	writeFiles(t, r.Top, map[string]string{"a.txt": "a edited here\n", "notes.txt": "untracked\n", "x.log": "ignored\n"})
	s, br := offloadTo(t, env, r)
	writeFiles(t, br.Top, map[string]string{"box.txt": "made in the box\n"})
	run(t, br.Top, env, "git", "add", "-A")
	run(t, br.Top, env, "git", "commit", "-qm", "box: add box.txt")
	writeFiles(t, br.Top, map[string]string{"b.txt": "left uncommitted by the box\n"})
	boxHead := run(t, br.Top, env, "git", "rev-parse", "HEAD")
	boxBack(t, env, r, br)

	m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome != FastForward || m.Head != boxHead {
		t.Fatalf("got %+v, want a fast-forward to %s", m, boxHead)
	}
	if got := run(t, r.Top, env, "git", "rev-parse", "HEAD"); got != boxHead {
		t.Errorf("HEAD %s, want the box's %s", got, boxHead)
	}
	if got := run(t, r.Top, env, "git", "rev-parse", RefPreBack+testID); got != head {
		t.Errorf("pre-back %s, want the old HEAD %s", got, head)
	}
	want := map[string]string{
		".gitignore": "-rw-r--r-- *.log\n", "a.txt": "-rw-r--r-- a edited here\n", "b.txt": "-rw-r--r-- left uncommitted by the box\n",
		"box.txt": "-rw-r--r-- made in the box\n", "notes.txt": "-rw-r--r-- untracked\n", "x.log": "-rw-r--r-- ignored\n",
	}
	if diff := cmp.Diff(want, files(t, r.Top)); diff != "" {
		t.Errorf("work tree (-want +got):\n%s", diff)
	}
	// The box committed everything but b.txt, left uncommitted.
	if got := run(t, r.Top, env, "git", "status", "--porcelain"); got != "M b.txt" {
		t.Errorf("status:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(r.GitDir, "index.lock")); !os.IsNotExist(err) {
		t.Errorf("index.lock left: %v", err)
	}
}

func TestBackMergeUncommitted(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	s, br := offloadTo(t, env, r)
	writeFiles(t, br.Top, map[string]string{"a.txt": "a from the box\n"})
	run(t, br.Top, env, "git", "commit", "-qam", "box: a")
	boxHead := run(t, br.Top, env, "git", "rev-parse", "HEAD")
	boxBack(t, env, r, br)
	// Meanwhile, here: an edit of another file, staged, and an untracked one.
	writeFiles(t, r.Top, map[string]string{"b.txt": "b edited here\n", "mine.txt": "mine\n"})
	run(t, r.Top, env, "git", "add", "b.txt")

	m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome != Merged || m.Head != boxHead {
		t.Fatalf("got %+v, want merged with the branch at %s", m, boxHead)
	}
	want := map[string]string{"a.txt": "-rw-r--r-- a from the box\n", "b.txt": "-rw-r--r-- b edited here\n", "mine.txt": "-rw-r--r-- mine\n"}
	if diff := cmp.Diff(want, files(t, r.Top)); diff != "" {
		t.Errorf("work tree (-want +got):\n%s", diff)
	}
	// The staged change is carried over onto the box's commit.
	if got := run(t, r.Top, env, "git", "status", "--porcelain"); got != "M  b.txt\n?? mine.txt" {
		t.Errorf("status:\n%s", got)
	}
}

func TestBackMergeAfterLocalCommit(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	s, br := offloadTo(t, env, r)
	writeFiles(t, br.Top, map[string]string{"a.txt": "a from the box\n"})
	run(t, br.Top, env, "git", "commit", "-qam", "box: a")
	boxBack(t, env, r, br)
	writeFiles(t, r.Top, map[string]string{"b.txt": "b committed here\n"})
	run(t, r.Top, env, "git", "commit", "-qam", "here: b")
	head := run(t, r.Top, env, "git", "rev-parse", "HEAD")

	m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome != Merged || m.Head != "" {
		t.Fatalf("got %+v, want merged with the branch where it is", m)
	}
	if got := run(t, r.Top, env, "git", "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved to %s", got)
	}
	if got := run(t, r.Top, env, "git", "status", "--porcelain"); got != "M a.txt" {
		t.Errorf("status:\n%s", got)
	}
}

func TestBackBranch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local map[string]string
		stage bool
		box   map[string]string
	}{
		{name: "conflict", local: map[string]string{"a.txt": "a here\n"}, box: map[string]string{"a.txt": "a in the box\n"}},
		{name: "same file, clean merge", local: map[string]string{"a.txt": "1 here\n2\n3\n4\n5\n"}, box: map[string]string{"a.txt": "1\n2\n3\n4\n5 in the box\n"}},
		{name: "staged", local: map[string]string{"a.txt": "1 here\n2\n3\n4\n5\n"}, stage: true, box: map[string]string{"a.txt": "1\n2\n3\n4\n5 in the box\n"}},
		{name: "untracked here, added in the box", local: map[string]string{"new.txt": "here\n"}, box: map[string]string{"new.txt": "box\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			r := newRepo(t, env, map[string]string{"a.txt": "1\n2\n3\n4\n5\n"})
			s, br := offloadTo(t, env, r)
			writeFiles(t, br.Top, tc.box)
			run(t, br.Top, env, "git", "add", "-A")
			run(t, br.Top, env, "git", "commit", "-qm", "box")
			sp := boxBack(t, env, r, br)
			writeFiles(t, r.Top, tc.local)
			if tc.stage {
				run(t, r.Top, env, "git", "add", "-A")
			}
			before := files(t, r.Top)
			index := readFile(t, filepath.Join(r.GitDir, "index"))
			head := run(t, r.Top, env, "git", "rev-parse", "HEAD")

			m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
			if err != nil {
				t.Fatal(err)
			}
			if m.Outcome != Branched || m.Branch != "cocoonbox/back-20261103T140509Z" || m.Reason == "" {
				t.Fatalf("got %+v, want the branch", m)
			}
			if got := run(t, r.Top, env, "git", "rev-parse", m.Branch); got != sp {
				t.Errorf("the branch is at %s, want S' %s", got, sp)
			}
			if diff := cmp.Diff(before, files(t, r.Top)); diff != "" {
				t.Errorf("the work tree changed (-before +after):\n%s", diff)
			}
			if readFile(t, filepath.Join(r.GitDir, "index")) != index {
				t.Error("the index changed")
			}
			if got := run(t, r.Top, env, "git", "rev-parse", "HEAD"); got != head {
				t.Errorf("HEAD moved")
			}
		})
	}
}

func TestBackIndexLocked(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	s, br := offloadTo(t, env, r)
	writeFiles(t, br.Top, map[string]string{"a.txt": "box\n"})
	run(t, br.Top, env, "git", "commit", "-qam", "box")
	boxBack(t, env, r, br)
	lock := filepath.Join(r.GitDir, "index.lock")
	os.WriteFile(lock, []byte("held"), 0o644)
	before := files(t, r.Top)
	head := run(t, r.Top, env, "git", "rev-parse", "HEAD")

	_, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
	if !errors.Is(err, ErrIndexLocked) {
		t.Fatalf("got %v, want ErrIndexLocked", err)
	}
	if diff := cmp.Diff(before, files(t, r.Top)); diff != "" {
		t.Errorf("the work tree changed:\n%s", diff)
	}
	if got := run(t, r.Top, env, "git", "rev-parse", "HEAD"); got != head {
		t.Error("HEAD moved")
	}
	if readFile(t, lock) != "held" {
		t.Error("someone else's index.lock was touched")
	}
	if out := run(t, r.Top, env, "git", "for-each-ref", RefPreBack); out != "" {
		t.Errorf("pre-back ref made: %s", out)
	}
	os.Remove(lock)
	m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
	if err != nil || m.Outcome != FastForward {
		t.Fatalf("once the lock is gone: %+v, %v", m, err)
	}
	if m, err = r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime); err != nil || m.Outcome != UpToDate {
		t.Fatalf("again: %+v, %v", m, err)
	}
}

func TestBackBranchName(t *testing.T) {
	got := BackBranch(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)))
	if got != "cocoonbox/back-20260102T020405Z" {
		t.Errorf("got %s", got)
	}
	if !strings.HasPrefix(got, "cocoonbox/back-") {
		t.Fail()
	}
}

// backState is what back must leave alone when it takes the branch: the
// files, the index file and HEAD.
type backState struct {
	files map[string]string
	index string
	head  string
}

func stateOf(t *testing.T, env []string, r *Repo) backState {
	t.Helper()
	return backState{files(t, r.Top), readFile(t, filepath.Join(r.GitDir, "index")), run(t, r.Top, env, "git", "rev-parse", "HEAD")}
}

// wantBranch checks that m is the branch outcome at S' and that nothing
// else changed since before.
func wantBranch(t *testing.T, env []string, r *Repo, m *MergeResult, sp string, before backState) {
	t.Helper()
	if m.Outcome != Branched || m.Reason == "" {
		t.Fatalf("got %+v, want the branch", m)
	}
	t.Logf("reason: %s", m.Reason)
	if got := run(t, r.Top, env, "git", "rev-parse", m.Branch); got != sp {
		t.Errorf("the branch is at %s, want S' %s", got, sp)
	}
	after := stateOf(t, env, r)
	if diff := cmp.Diff(before.files, after.files); diff != "" {
		t.Errorf("the work tree changed (-before +after):\n%s", diff)
	}
	if after.index != before.index {
		t.Error("the index changed")
	}
	if after.head != before.head {
		t.Error("HEAD moved")
	}
	if out := run(t, r.Top, env, "git", "for-each-ref", "refs/cocoonbox/pre-back/", RefPreBackWork); out != "" {
		t.Errorf("pre-back refs made: %s", out)
	}
}

// boxCommit writes files in the box copy and commits them, and only them
// (force-added if ignored).
func boxCommit(t *testing.T, env []string, br *Repo, fs map[string]string, msg string) {
	t.Helper()
	writeFiles(t, br.Top, fs)
	args := []string{"add", "-f", "--"}
	for p := range fs {
		args = append(args, p)
	}
	run(t, br.Top, env, "git", args...)
	run(t, br.Top, env, "git", "commit", "-qm", msg)
}

func TestBackKeepsIgnoredFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		local  map[string]string // ignored here
		box    map[string]string
		commit bool // a local commit after the offload: a merge, not a fast-forward
	}{
		{name: "fast-forward over an ignored file", local: map[string]string{".env": "API_KEY=the real one\n"}, box: map[string]string{".env": "API_KEY=changeme\n"}},
		{name: "fast-forward over an ignored directory", local: map[string]string{"data/big.csv": "precious\n"}, box: map[string]string{"data": "a file now\n"}},
		{name: "fast-forward under an ignored file", local: map[string]string{"build.log": "the last build\n"}, box: map[string]string{"build.log/x": "a directory now\n"}},
		{name: "merge over an ignored file", local: map[string]string{".env": "API_KEY=the real one\n"}, box: map[string]string{".env": "API_KEY=changeme\n"}, commit: true},
		{name: "merge over an ignored directory", local: map[string]string{"data/big.csv": "precious\n"}, box: map[string]string{"data": "a file now\n"}, commit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			r := newRepo(t, env, map[string]string{".gitignore": ".env\ndata/\n*.log\n", "a.txt": "a\n", "b.txt": "b\n"})
			writeFiles(t, r.Top, tc.local)
			s, br := offloadTo(t, env, r)
			boxCommit(t, env, br, tc.box, "box: add what is ignored here")
			sp := boxBack(t, env, r, br)
			if tc.commit {
				writeFiles(t, r.Top, map[string]string{"b.txt": "b committed here\n"})
				run(t, r.Top, env, "git", "commit", "-qam", "here: b")
			}
			before := stateOf(t, env, r)

			m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
			if err != nil {
				t.Fatal(err)
			}
			wantBranch(t, env, r, m, sp, before)
		})
	}
}

func TestBackWritesIgnoredPathsThatAreAbsent(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{".gitignore": ".env\n", "a.txt": "a\n"})
	s, br := offloadTo(t, env, r)
	boxCommit(t, env, br, map[string]string{".env": "API_KEY=changeme\n"}, "box: a template .env")
	boxBack(t, env, r, br)

	m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome != FastForward {
		t.Fatalf("got %+v, want a fast-forward", m)
	}
	if got := readFile(t, filepath.Join(r.Top, ".env")); got != "API_KEY=changeme\n" {
		t.Errorf(".env is %q", got)
	}
}

// A file: secret that only the laptop's global excludes file ignores: the
// box's S' holds the link to the box's tmpfs, which must never replace
// the secret here.
func TestBackFileSecretIgnoredOnlyHere(t *testing.T) {
	env := testEnv(t)
	home := strings.TrimPrefix(env[0], "HOME=")
	writeFiles(t, home, map[string]string{".gitignore_global": ".env\n"})
	run(t, home, env, "git", "config", "--global", "core.excludesFile", filepath.Join(home, ".gitignore_global"))
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	writeFiles(t, r.Top, map[string]string{".env": "API_KEY=precious\n"})
	boxEnv := testEnv(t)
	s, br := offloadTo(t, boxEnv, r)
	if err := os.Symlink("/run/cocoonbox-offload/secrets/0123/file-.env", filepath.Join(br.Top, ".env")); err != nil {
		t.Fatal(err)
	}
	run(t, br.Top, boxEnv, "git", "add", "-A")
	run(t, br.Top, boxEnv, "git", "commit", "-qm", "box: everything")
	sp := boxBack(t, boxEnv, r, br)
	before := stateOf(t, env, r)

	m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
	if err != nil {
		t.Fatal(err)
	}
	wantBranch(t, env, r, m, sp, before)
	if fi, err := os.Lstat(filepath.Join(r.Top, ".env")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf(".env is no longer the regular file: %v %v", fi, err)
	}
}

func TestBackKeepsUntrackedFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit bool
		want   string
	}{
		{name: "fast-forward", want: FastForward},
		{name: "merge", commit: true, want: Merged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			r := newRepo(t, env, map[string]string{".gitignore": "*.log\n", "a.txt": "a\n", "b.txt": "b\n", "old.txt": "tracked\n"})
			untracked := map[string]string{"scratch/notes.md": "my notes\n", "TODO.txt": "todo\n", "gone.txt": "the box removes it\n"}
			writeFiles(t, r.Top, untracked)
			s, br := offloadTo(t, env, r)
			// The box starts ignoring two untracked files, removes
			// another and a tracked one.
			writeFiles(t, br.Top, map[string]string{".gitignore": "*.log\nscratch/\nTODO.txt\n"})
			os.Remove(filepath.Join(br.Top, "gone.txt"))
			run(t, br.Top, env, "git", "rm", "-q", "old.txt")
			run(t, br.Top, env, "git", "commit", "-qam", "box: ignore scratch")
			boxBack(t, env, r, br)
			if tc.commit {
				writeFiles(t, r.Top, map[string]string{"b.txt": "b committed here\n"})
				run(t, r.Top, env, "git", "commit", "-qm", "here: b", "b.txt")
			}

			m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
			if err != nil {
				t.Fatal(err)
			}
			if m.Outcome != tc.want {
				t.Fatalf("got %+v, want %s", m, tc.want)
			}
			got := files(t, r.Top)
			for p, content := range untracked {
				if got[p] != "-rw-r--r-- "+content {
					t.Errorf("%s: %q, want it kept", p, got[p])
				}
			}
			if _, ok := got["old.txt"]; ok {
				t.Error("old.txt, tracked and removed in the box, is still here")
			}
		})
	}
}

func TestBackKeepsIndexFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, env []string, r *Repo)
	}{
		{name: "sparse checkout", setup: func(t *testing.T, env []string, r *Repo) {
			run(t, r.Top, env, "git", "sparse-checkout", "set", "in")
		}},
		{name: "sparse index", setup: func(t *testing.T, env []string, r *Repo) {
			run(t, r.Top, env, "git", "sparse-checkout", "set", "--sparse-index", "in")
		}},
		{name: "skip-worktree, assume-unchanged, intent-to-add", setup: func(t *testing.T, env []string, r *Repo) {
			run(t, r.Top, env, "git", "update-index", "--skip-worktree", "config.local")
			run(t, r.Top, env, "git", "update-index", "--assume-unchanged", "big.dat")
			writeFiles(t, r.Top, map[string]string{"config.local": "password=mine\n", "big.dat": "regenerated here\n", "planned.txt": "planned\n"})
			run(t, r.Top, env, "git", "add", "-N", "planned.txt")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			r := newRepo(t, env, map[string]string{"in/i.txt": "i\n", "out/o.txt": "o\n", "config.local": "password=default\n", "big.dat": "generated\n", "a.txt": "a\n"})
			tc.setup(t, env, r)
			flags := strings.Split(run(t, r.Top, env, "git", "ls-files", "-t", "-v"), "\n")
			status := run(t, r.Top, env, "git", "status", "--porcelain")
			local := files(t, r.Top)
			s, br := offloadTo(t, env, r)
			boxCommit(t, env, br, map[string]string{"box.txt": "made in the box\n", "a.txt": "a from the box\n"}, "box: box.txt")
			boxHead := run(t, br.Top, env, "git", "rev-parse", "HEAD")
			boxBack(t, env, r, br)

			m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
			if err != nil {
				t.Fatal(err)
			}
			if m.Outcome != FastForward || m.Head != boxHead {
				t.Fatalf("got %+v, want a fast-forward to %s", m, boxHead)
			}
			wantFlags := append(flags, "H box.txt")
			slices.SortFunc(wantFlags, func(a, b string) int { return strings.Compare(a[2:], b[2:]) })
			if diff := cmp.Diff(wantFlags, strings.Split(run(t, r.Top, env, "git", "ls-files", "-t", "-v"), "\n")); diff != "" {
				t.Errorf("index flags (-want +got):\n%s", diff)
			}
			if got := run(t, r.Top, env, "git", "status", "--porcelain"); got != status {
				t.Errorf("status:\n%s\nwant as before:\n%s", got, status)
			}
			local["box.txt"] = "-rw-r--r-- made in the box\n"
			local["a.txt"] = "-rw-r--r-- a from the box\n"
			if diff := cmp.Diff(local, files(t, r.Top)); diff != "" {
				t.Errorf("work tree (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackBranchesOverSkippedFiles(t *testing.T) {
	for _, flag := range []string{"--skip-worktree", "--assume-unchanged"} {
		t.Run(flag, func(t *testing.T) {
			env := testEnv(t)
			r := newRepo(t, env, map[string]string{"config.local": "password=default\n", "a.txt": "a\n"})
			run(t, r.Top, env, "git", "update-index", flag, "config.local")
			writeFiles(t, r.Top, map[string]string{"config.local": "password=mine\n"})
			s, br := offloadTo(t, env, r)
			boxCommit(t, env, br, map[string]string{"config.local": "password=default\nport=1\n"}, "box: config")
			sp := boxBack(t, env, r, br)
			before := stateOf(t, env, r)

			m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
			if err != nil {
				t.Fatal(err)
			}
			wantBranch(t, env, r, m, sp, before)
		})
	}
}

// Back reads no porcelain diff, whose form the user's configuration
// changes, and carries staged changes over in plumbing.
func TestBackIgnoresDiffConfig(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "1\n2\n3\n", "b.txt": "b\n"})
	for _, kv := range [][2]string{{"diff.noprefix", "true"}, {"diff.mnemonicPrefix", "true"}, {"color.ui", "always"}, {"diff.external", "false"}, {"diff.relative", "true"}} {
		run(t, r.Top, env, "git", "config", kv[0], kv[1])
	}
	writeFiles(t, r.Top, map[string]string{"a.txt": "1 staged\n2\n3\n"})
	run(t, r.Top, env, "git", "add", "a.txt")
	writeFiles(t, r.Top, map[string]string{"a.txt": "1 staged\n2\n3 unstaged\n"})
	s, br := offloadTo(t, env, r)
	boxCommit(t, env, br, map[string]string{"box.txt": "box\n"}, "box: box.txt")
	boxBack(t, env, r, br)

	m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome != FastForward || m.Head == "" {
		t.Fatalf("got %+v, want a fast-forward", m)
	}
	if got := run(t, r.Top, env, "git", "show", ":a.txt"); got != "1 staged\n2\n3" {
		t.Errorf("the index's a.txt is %q, want the staged one", got)
	}
	if got := run(t, r.Top, env, "git", "status", "--porcelain"); got != "MM a.txt" {
		t.Errorf("status:\n%s", got)
	}
}

func TestBackStagedChanges(t *testing.T) {
	t.Run("staged before the offload, committed over in the box", func(t *testing.T) {
		env := testEnv(t)
		r := newRepo(t, env, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
		writeFiles(t, r.Top, map[string]string{"a.txt": "a staged\n", "b.txt": "b staged\n"})
		run(t, r.Top, env, "git", "add", "a.txt", "b.txt")
		s, br := offloadTo(t, env, r)
		boxCommit(t, env, br, map[string]string{"a.txt": "a staged, then the box\n"}, "box: a")
		boxHead := run(t, br.Top, env, "git", "rev-parse", "HEAD")
		boxBack(t, env, r, br)

		m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
		if err != nil {
			t.Fatal(err)
		}
		if m.Outcome != FastForward || m.Head != boxHead {
			t.Fatalf("got %+v, want a fast-forward", m)
		}
		// a.txt is the box's commit's; b.txt, which the box's commits
		// left alone, stays staged.
		if got := run(t, r.Top, env, "git", "status", "--porcelain"); got != "M  b.txt" {
			t.Errorf("status:\n%s", got)
		}
	})
	t.Run("staged since the offload as the box committed it", func(t *testing.T) {
		env := testEnv(t)
		r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
		writeFiles(t, r.Top, map[string]string{"a.txt": "a edited\n"})
		s, br := offloadTo(t, env, r)
		run(t, br.Top, env, "git", "commit", "-qam", "box: commit a as it came")
		boxBack(t, env, r, br)
		run(t, r.Top, env, "git", "add", "a.txt")

		m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
		if err != nil {
			t.Fatal(err)
		}
		if m.Outcome != FastForward || m.Head == "" {
			t.Fatalf("got %+v, want a fast-forward", m)
		}
		if got := run(t, r.Top, env, "git", "status", "--porcelain"); got != "" {
			t.Errorf("status:\n%s", got)
		}
	})
	t.Run("a staged file where the box's commits make a directory", func(t *testing.T) {
		env := testEnv(t)
		r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
		writeFiles(t, r.Top, map[string]string{"lib": "a staged file\n"})
		run(t, r.Top, env, "git", "add", "lib")
		s, br := offloadTo(t, env, r)
		os.Remove(filepath.Join(br.Top, "lib"))
		boxCommit(t, env, br, map[string]string{"lib/x.go": "package lib\n"}, "box: lib/x.go")
		sp := boxBack(t, env, r, br)
		before := stateOf(t, env, r)

		m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
		if err != nil {
			t.Fatal(err)
		}
		wantBranch(t, env, r, m, sp, before)
	})
	t.Run("staged since the offload, changed by the box's commits", func(t *testing.T) {
		env := testEnv(t)
		r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
		writeFiles(t, r.Top, map[string]string{"a.txt": "a edited\n"})
		s, br := offloadTo(t, env, r)
		boxCommit(t, env, br, map[string]string{"a.txt": "a edited, then the box\n"}, "box: a")
		sp := boxBack(t, env, r, br)
		run(t, r.Top, env, "git", "add", "a.txt")
		before := stateOf(t, env, r)

		m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
		if err != nil {
			t.Fatal(err)
		}
		wantBranch(t, env, r, m, sp, before)
	})
}

// failingSmudge makes checking out *.bin fail here: a required filter
// whose smudge exits 1. The box has no such filter.
func failingSmudge(t *testing.T, env []string, r *Repo) {
	t.Helper()
	writeFiles(t, r.GitDir, map[string]string{"info/attributes": "*.bin filter=boom\n"})
	run(t, r.Top, env, "git", "config", "filter.boom.clean", "cat")
	run(t, r.Top, env, "git", "config", "filter.boom.smudge", "false")
	run(t, r.Top, env, "git", "config", "filter.boom.required", "true")
}

func TestBackUpdateFails(t *testing.T) {
	t.Run("before any file changed: the branch", func(t *testing.T) {
		env := testEnv(t)
		r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
		failingSmudge(t, env, r)
		s, br := offloadTo(t, env, r)
		boxCommit(t, env, br, map[string]string{"z.bin": "binary\n"}, "box: z.bin")
		sp := boxBack(t, env, r, br)
		before := stateOf(t, env, r)

		m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
		if err != nil {
			t.Fatal(err)
		}
		wantBranch(t, env, r, m, sp, before)
	})
	t.Run("partway: says where everything is", func(t *testing.T) {
		env := testEnv(t)
		r := newRepo(t, env, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
		failingSmudge(t, env, r)
		writeFiles(t, r.Top, map[string]string{"b.txt": "b edited here\n", "mine.txt": "mine\n"})
		s, br := offloadTo(t, env, r)
		boxCommit(t, env, br, map[string]string{"a.txt": "a from the box\n", "z.bin": "binary\n"}, "box: a, z.bin")
		boxBack(t, env, r, br)
		before := stateOf(t, env, r)

		_, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
		var oe *Error
		if !errors.As(err, &oe) || oe.Code != ExitFailed {
			t.Fatalf("got %v, want an *Error that says the update stopped partway", err)
		}
		t.Logf("%v\n%s", err, nextText(oe.Next...))
		if !strings.Contains(err.Error(), "partway") || !strings.Contains(nextText(oe.Next...), RefPreBackWork+testID) {
			t.Errorf("the message does not say where things are: %v %s", err, nextText(oe.Next...))
		}
		after := stateOf(t, env, r)
		if after.head != before.head || after.index != before.index {
			t.Error("HEAD or the index changed")
		}
		if after.files["a.txt"] != "-rw-r--r-- a from the box\n" {
			t.Fatalf("a.txt is %q: the update did not stop partway as the test wants", after.files["a.txt"])
		}
		if _, err := os.Stat(filepath.Join(r.GitDir, "index.lock")); !os.IsNotExist(err) {
			t.Errorf("index.lock left: %v", err)
		}
		// The way back it names puts every file back.
		run(t, r.Top, env, "git", "restore", "--source="+RefPreBackWork+testID, "--worktree", "--", ":/")
		if diff := cmp.Diff(before.files, files(t, r.Top)); diff != "" {
			t.Errorf("after git restore (-before +after):\n%s", diff)
		}
	})
}

func TestBackMergeInProgress(t *testing.T) {
	// setup makes a merge that stopped on a conflict, resolved and
	// staged, and offloads it; the box copy is mid-merge as rsync leaves
	// it.
	setup := func(t *testing.T, env []string) (*Repo, string, *Repo) {
		r := newRepo(t, env, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
		run(t, r.Top, env, "git", "checkout", "-qb", "side")
		boxCommitHere(t, env, r.Top, map[string]string{"a.txt": "a on side\n"}, "side: a")
		run(t, r.Top, env, "git", "checkout", "-q", "main")
		boxCommitHere(t, env, r.Top, map[string]string{"a.txt": "a on main\n"}, "main: a")
		c := exec.Command("git", "merge", "-q", "side")
		c.Dir, c.Env = r.Top, env
		if c.Run() == nil {
			t.Fatal("the merge did not stop")
		}
		writeFiles(t, r.Top, map[string]string{"a.txt": "a resolved\n"})
		run(t, r.Top, env, "git", "add", "a.txt")
		s, br := offloadTo(t, env, r)
		for _, f := range []string{"MERGE_HEAD", "MERGE_MSG", "MERGE_MODE"} {
			writeFiles(t, br.GitDir, map[string]string{f: readFile(t, filepath.Join(r.GitDir, f))})
		}
		run(t, br.Top, env, "git", "add", "a.txt")
		return r, s, br
	}
	t.Run("the box commits the merge", func(t *testing.T) {
		env := testEnv(t)
		r, s, br := setup(t, env)
		run(t, br.Top, env, "git", "commit", "-q", "--no-edit")
		boxHead := run(t, br.Top, env, "git", "rev-parse", "HEAD")
		boxBack(t, env, r, br)

		m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
		if err != nil {
			t.Fatal(err)
		}
		if m.Outcome != FastForward || m.Head != boxHead || !m.MergeDone {
			t.Fatalf("got %+v, want a fast-forward to the box's merge %s", m, boxHead)
		}
		if r.inProgress() != "" {
			t.Errorf("%s is still in progress", r.inProgress())
		}
		if got := run(t, r.Top, env, "git", "status", "--porcelain"); got != "" {
			t.Errorf("status:\n%s", got)
		}
	})
	t.Run("the box leaves the merge uncommitted", func(t *testing.T) {
		env := testEnv(t)
		r, s, br := setup(t, env)
		writeFiles(t, br.Top, map[string]string{"b.txt": "b from the box\n"})
		sp := boxBack(t, env, r, br)
		before := stateOf(t, env, r)

		m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
		if err != nil {
			t.Fatal(err)
		}
		wantBranch(t, env, r, m, sp, before)
		if r.inProgress() != "a merge" {
			t.Errorf("the merge here is no longer in progress")
		}
	})
	t.Run("a rebase in progress", func(t *testing.T) {
		env := testEnv(t)
		r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
		boxCommitHere(t, env, r.Top, map[string]string{"a.txt": "a 2\n"}, "two")
		c := exec.Command("git", "rebase", "-q", "--exec", "false", "HEAD~1")
		c.Dir, c.Env = r.Top, env
		if c.Run() == nil || r.inProgress() != "a rebase" {
			t.Fatal("the rebase did not stop")
		}
		s, br := offloadTo(t, env, r)
		boxCommit(t, env, br, map[string]string{"box.txt": "box\n"}, "box")
		sp := boxBack(t, env, r, br)
		before := stateOf(t, env, r)

		m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
		if err != nil {
			t.Fatal(err)
		}
		wantBranch(t, env, r, m, sp, before)
	})
}

// boxCommitHere writes files in dir and commits them.
func boxCommitHere(t *testing.T, env []string, dir string, fs map[string]string, msg string) {
	t.Helper()
	writeFiles(t, dir, fs)
	run(t, dir, env, "git", "add", "-A")
	run(t, dir, env, "git", "commit", "-qm", msg)
}
