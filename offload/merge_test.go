package offload

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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

// boxCommit writes files in the box copy, force-adds them and commits.
func boxCommit(t *testing.T, env []string, br *Repo, fs map[string]string, msg string) {
	t.Helper()
	writeFiles(t, br.Top, fs)
	run(t, br.Top, env, "git", "add", "-f", "-A")
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
