package offload

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestIndexReadAsGit: what back's merge and the snapshot read of an index
// file themselves (unmerged entries, skip-worktree and assume-unchanged,
// each path's mode, object and stage) is what git ls-files says of it,
// in index versions 2, 3 and 4, with a conflict, a symlink, an
// executable and a submodule's gitlink; a sparse index is left to git.
func TestIndexReadAsGit(t *testing.T) {
	env := testEnv(t)
	ctx := context.Background()
	r := newRepo(t, env, map[string]string{"a": "a\n", "b": "b\n", "c": "c\n", "d/e": "e\n", "f/g": "g\n", "x": "x\n"})
	os.Symlink("a", filepath.Join(r.Top, "link"))
	os.Chmod(filepath.Join(r.Top, "x"), 0o755)
	run(t, r.Top, env, "git", "add", "-A")
	run(t, r.Top, env, "git", "update-index", "--add", "--cacheinfo", "160000,"+run(t, r.Top, env, "git", "rev-parse", "HEAD")+",sub")
	run(t, r.Top, env, "git", "commit", "-q", "-m", "more")
	run(t, r.Top, env, "git", "update-index", "--skip-worktree", "b")
	run(t, r.Top, env, "git", "update-index", "--assume-unchanged", "c", "b")
	check := func(name string, unmerged bool) {
		t.Helper()
		ix, ok := readIndex(r.indexPath())
		if !ok {
			t.Fatalf("%s: the index was not read", name)
		}
		flags, err := r.indexFlagsGit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(flags, indexFlagsOf(ix)); diff != "" {
			t.Errorf("%s: flags (-git +read):\n%s", name, diff)
		}
		st, err := stagesGit(ctx, r.git)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(st, stagesOf(ix)); diff != "" {
			t.Errorf("%s: stages (-git +read):\n%s", name, diff)
		}
		if got, err := r.hasUnmerged(ctx); err != nil || got != unmerged {
			t.Errorf("%s: hasUnmerged = %v, %v; want %v", name, got, err, unmerged)
		}
	}
	for _, v := range []string{"2", "3", "4"} {
		run(t, r.Top, env, "git", "update-index", "--index-version", v)
		check("version "+v, false)
	}
	// A conflict: stages 1 to 3 of one path.
	run(t, r.Top, env, "git", "checkout", "-q", "-b", "other")
	writeFiles(t, r.Top, map[string]string{"d/e": "other\n"})
	run(t, r.Top, env, "git", "commit", "-q", "-am", "other")
	run(t, r.Top, env, "git", "checkout", "-q", "main")
	writeFiles(t, r.Top, map[string]string{"d/e": "main\n"})
	run(t, r.Top, env, "git", "commit", "-q", "-am", "main")
	c := exec.Command("git", "merge", "-q", "other")
	c.Dir, c.Env = r.Top, env
	c.Run() // fails: the conflict
	check("a conflict", true)
	run(t, r.Top, env, "git", "merge", "--abort")

	// A sparse index: its directory entries are git's to expand.
	run(t, r.Top, env, "git", "sparse-checkout", "set", "--cone", "--sparse-index", "d")
	if _, ok := readIndex(r.indexPath()); ok {
		t.Errorf("a sparse index was read, not left to git")
	}
}
