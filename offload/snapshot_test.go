package offload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{".gitignore": "build/\n*.log\n", "a.txt": "a\n", "b.txt": "b\n"})
	writeFiles(t, r.Top, map[string]string{"a.txt": "a changed\n", "staged.txt": "s\n"})
	run(t, r.Top, env, "git", "add", "staged.txt")
	writeFiles(t, r.Top, map[string]string{"new.txt": "untracked\n", "build/out": "ignored", "x.log": "ignored"})
	os.Remove(filepath.Join(r.Top, "b.txt"))
	index := readFile(t, filepath.Join(r.GitDir, "index"))
	status := run(t, r.Top, env, "git", "status", "--porcelain")

	s, err := r.snapshot(ctx, "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, r.Top, env, "git", "rev-parse", RefOffload+"0123456789abcdef"); got != s {
		t.Errorf("%s is %s, want S %s", RefOffload, got, s)
	}
	if got, want := run(t, r.Top, env, "git", "rev-parse", s+"^1"), run(t, r.Top, env, "git", "rev-parse", "HEAD"); got != want {
		t.Errorf("S's parent is %s, want HEAD %s", got, want)
	}
	files := strings.Fields(run(t, r.Top, env, "git", "ls-tree", "-r", "--name-only", s))
	if want := []string{".gitignore", "a.txt", "new.txt", "staged.txt"}; !slices.Equal(files, want) {
		t.Errorf("S holds %v, want %v", files, want)
	}
	if got := run(t, r.Top, env, "git", "show", s+":a.txt"); got != "a changed" {
		t.Errorf("S's a.txt is %q", got)
	}
	ifiles := strings.Fields(run(t, r.Top, env, "git", "ls-tree", "-r", "--name-only", RefIndex+"0123456789abcdef"))
	if want := []string{".gitignore", "a.txt", "b.txt", "staged.txt"}; !slices.Equal(ifiles, want) {
		t.Errorf("the index commit holds %v, want %v", ifiles, want)
	}
	if readFile(t, filepath.Join(r.GitDir, "index")) != index {
		t.Error("the snapshot changed the real index")
	}
	if got := run(t, r.Top, env, "git", "status", "--porcelain"); got != status {
		t.Errorf("git status changed:\n%s\nwant\n%s", got, status)
	}
	ents, _ := filepath.Glob(filepath.Join(r.GitDir, "cocoonbox-index-*"))
	if len(ents) > 0 {
		t.Errorf("temporary indexes left: %v", ents)
	}
}

func TestSnapshotRefuses(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	dir := t.TempDir()
	run(t, dir, env, "git", "init", "-q")
	r, err := OpenRepo(ctx, dir, env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.snapshot(ctx, "1"); !errors.Is(err, errNoCommit) {
		t.Errorf("no commit: got %v", err)
	}
	var e *Error
	if err := r.snapshotReady(ctx); !errors.As(err, &e) || e.Code != ExitRefused {
		t.Errorf("no commit, before begin: got %v, want a refusal", err)
	}
	r = newRepo(t, env, map[string]string{"f": "base\n"})
	run(t, r.Top, env, "git", "checkout", "-q", "-b", "other")
	writeFiles(t, r.Top, map[string]string{"f": "other\n"})
	run(t, r.Top, env, "git", "commit", "-qam", "other")
	run(t, r.Top, env, "git", "checkout", "-q", "main")
	writeFiles(t, r.Top, map[string]string{"f": "main\n"})
	run(t, r.Top, env, "git", "commit", "-qam", "main")
	c := run(t, r.Top, env, "sh", "-c", "git merge other >/dev/null 2>&1; git ls-files -u | wc -l")
	if c == "0" {
		t.Fatal("no conflict made")
	}
	if _, err := r.snapshot(ctx, "2"); !errors.Is(err, errConflicts) {
		t.Errorf("conflicts: got %v", err)
	}
	if err := r.snapshotReady(ctx); !errors.As(err, &e) || e.Code != ExitRefused || !errors.Is(err, errConflicts) {
		t.Errorf("conflicts, before begin: got %v, want a refusal", err)
	}
}

func TestBundle(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a": "1\n"})
	first := run(t, r.Top, env, "git", "rev-parse", "HEAD")
	writeFiles(t, r.Top, map[string]string{"a": "2\n"})
	run(t, r.Top, env, "git", "commit", "-qam", "two")
	head := run(t, r.Top, env, "git", "rev-parse", "HEAD")
	writeFiles(t, r.Top, map[string]string{"u": "uncommitted\n"})
	run(t, r.Top, env, "git", "worktree", "add", "-q", "--detach", filepath.Join(t.TempDir(), "other"))
	s, err := r.snapshot(ctx, "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "offload.bundle")
	// The box has the first commit and one the laptop never saw.
	boxRefs := map[string]string{"refs/heads/main": first, "refs/heads/box-only": strings.Repeat("e", 40), "HEAD": "not-an-oid"}
	ok, err := r.bundle(ctx, p, boxRefs)
	if err != nil || !ok {
		t.Fatalf("bundle: %v, %v", ok, err)
	}
	heads := run(t, r.Top, env, "git", "bundle", "list-heads", p)
	for _, want := range []string{head + " refs/heads/main", s + " " + RefOffload + "0123456789abcdef", head + " HEAD"} {
		if !strings.Contains(heads, want) {
			t.Errorf("the bundle lacks %q:\n%s", want, heads)
		}
	}
	if strings.Contains(heads, "worktrees/") {
		t.Errorf("the bundle lists another worktree's HEAD:\n%s", heads)
	}
	verify := run(t, r.Top, env, "git", "bundle", "verify", p)
	if !strings.Contains(verify, "requires") || !strings.Contains(verify, first) {
		t.Errorf("the bundle should require only %s (--not what the box has):\n%s", first, verify)
	}
	// The box has everything: git refuses an empty bundle, and none is left.
	all := map[string]string{}
	for _, l := range strings.Split(run(t, r.Top, env, "git", "for-each-ref", "--format=%(refname) %(objectname)"), "\n") {
		name, oid, _ := strings.Cut(l, " ")
		all[name] = oid
	}
	ok, err = r.bundle(ctx, p, all)
	if err != nil || ok {
		t.Fatalf("an empty bundle: %v, %v", ok, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("an empty bundle left a file: %v", err)
	}
}

func TestOpenRepo(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	if _, err := OpenRepo(ctx, t.TempDir(), env); !errors.Is(err, ErrNotRepo) {
		t.Errorf("outside a repository: %v", err)
	}
	parent := filepath.Join(t.TempDir(), "my repo (2)")
	os.MkdirAll(parent, 0o755)
	run(t, parent, env, "git", "init", "-q")
	run(t, parent, env, "git", "commit", "-q", "--allow-empty", "-m", "x")
	os.MkdirAll(filepath.Join(parent, "sub"), 0o755)
	r, err := OpenRepo(ctx, filepath.Join(parent, "sub"), env)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "my-repo--2-" || r.Linked || len(r.Key) != 16 {
		t.Errorf("got name %q linked %v key %q", r.Name, r.Linked, r.Key)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	run(t, parent, env, "git", "worktree", "add", "-q", wt)
	lr, err := OpenRepo(ctx, wt, env)
	if err != nil {
		t.Fatal(err)
	}
	if !lr.Linked || lr.CommonDir != filepath.Join(r.Top, ".git") || lr.Key == r.Key {
		t.Errorf("linked worktree: %+v", lr)
	}
	for in, want := range map[string]string{".hidden": "hidden", "..": "repo", "a b": "a-b", "ü": "repo", "x-ü": "x---"} {
		if got := copyName(in); got != want {
			t.Errorf("copyName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSnapshotRacyEdit is a same-size edit made in the same second as the
// index was written: its stat data matches the index entry, and only git's
// racy-clean check (an entry not older than the index file) makes git read
// the file again. S must hold the edit.
func TestSnapshotRacyEdit(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	// The commit's index holds a.txt with this mtime; the same-size edit
	// keeps it, and the index file itself was written in that second.
	when := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	p := filepath.Join(r.Top, "a.txt")
	if err := os.Chtimes(p, when, when); err != nil {
		t.Fatal(err)
	}
	run(t, r.Top, env, "git", "add", "a.txt")
	writeFiles(t, r.Top, map[string]string{"a.txt": "b\n"})
	for _, f := range []string{p, filepath.Join(r.GitDir, "index")} {
		if err := os.Chtimes(f, when, when); err != nil {
			t.Fatal(err)
		}
	}

	s, err := r.snapshot(ctx, "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, r.Top, env, "git", "show", s+":a.txt"); got != "b" {
		t.Errorf("S's a.txt is %q, want the edit %q", got, "b")
	}
}

// TestSnapshotNestedRepoError: git's reason, not its summary, names the
// cause of a failed snapshot.
func TestSnapshotNestedRepoError(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	nested := filepath.Join(r.Top, "nested")
	writeFiles(t, nested, map[string]string{"x.txt": "x\n"})
	run(t, nested, env, "git", "init", "-q")
	_, err := r.snapshot(context.Background(), "0123456789abcdef")
	if err == nil || !strings.Contains(err.Error(), "'nested/' does not have a commit checked out") {
		t.Errorf("got %v, want git's reason", err)
	}
}

// TestGitLockClash: a lock another git holds is named, with git's own
// line rather than its advice to remove the file.
func TestGitLockClash(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	lock := filepath.Join(r.GitDir, "refs", "heads", "x.lock")
	writeFiles(t, filepath.Dir(lock), map[string]string{"x.lock": ""})
	_, err := r.git.run(context.Background(), nil, "update-ref", "refs/heads/x", "HEAD")
	if got := heldLock(err); got != lock {
		t.Errorf("heldLock = %q, want %q (%v)", got, lock, err)
	}
	if err == nil || !strings.Contains(err.Error(), "Unable to create '"+lock+"': File exists") || strings.Contains(err.Error(), "manually") {
		t.Errorf("the message: %v", err)
	}
}

// TestOpenRepoControlPath: a path with a control character is refused
// as such (exit 3, the character named, the path printable), whether it
// is the working directory's or only the top's, reached through a link:
// never "not a git repository" with the raw character printed.
func TestOpenRepoControlPath(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	base := t.TempDir()
	for _, tc := range []struct{ name, char string }{{"a\nb", "a newline"}, {"a\tb", "a tab"}, {"a\x1b[31mb", "ESC"}, {"a\u009bb", "U+009B"}} {
		top := filepath.Join(base, tc.name)
		os.MkdirAll(top, 0o755)
		run(t, top, env, "git", "init", "-q")
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(top, link); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{top, link} {
			_, err := OpenRepo(ctx, dir, env)
			var e *Error
			if !errors.As(err, &e) || e.Code != ExitRefused || !errors.Is(err, ErrControlPath) {
				t.Errorf("OpenRepo(%q): %v, want a refusal for the control character", dir, err)
				continue
			}
			if msg := e.Error(); !strings.Contains(msg, "("+tc.char+", shown as ?)") || strings.ContainsFunc(msg, unicode.IsControl) {
				t.Errorf("OpenRepo(%q) says %q", dir, msg)
			}
		}
	}
}
