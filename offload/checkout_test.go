package offload

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The index back checks the work tree against before it changes it is
// the one wt was written from (git add -A in a copy of the real index):
// git trusts in it exactly what it trusts in the real one, and its
// entries carry the files' stat data, so the update hashes nothing that
// did not change. c.txt, changed with its size and mtime put back in a
// repository with core.trustctime off, is clean to git in the real index
// and so in this one (it was not hashed: wt keeps its old content, as git
// status does); a.txt, changed in the second of the last index write
// (racily clean), is read again and wt has the change.
func TestCheckoutIndexTrustsAsIndex(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "A\n", "b.txt": "B\n", "c.txt": "C\n"})
	run(t, r.Top, env, "git", "config", "core.trustctime", "false")
	t0 := time.Date(2020, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	old := t0.Add(-100 * time.Second)
	set := func(name, content string, mt time.Time) {
		t.Helper()
		p := filepath.Join(r.Top, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	set("a.txt", "A\n", t0)
	set("b.txt", "B\n", old)
	set("c.txt", "C\n", old)
	run(t, r.Top, env, "git", "update-index", "--refresh")
	idx := filepath.Join(r.GitDir, "index")
	if err := os.Chtimes(idx, t0.Add(300*time.Millisecond), t0.Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	set("a.txt", "X\n", t0)
	set("c.txt", "D\n", old)
	if got := run(t, r.Top, env, "git", "diff-files", "--name-only"); got != "a.txt" {
		t.Fatalf("git itself sees %q changed, want a.txt (the test's premise)", got)
	}
	ctx := context.Background()
	var w wtIndex
	defer w.release()
	wt, err := r.worktreeIndex(ctx, &w)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.txt": "X\n", "b.txt": "B\n", "c.txt": "C\n"} {
		if got := run(t, r.Top, env, "git", "cat-file", "blob", wt+":"+name); got+"\n" != want {
			t.Errorf("wt has %s = %q, want %q", name, got, want)
		}
	}
	out, err := w.g.run(ctx, nil, "diff-files", "--name-only")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out); got != "" {
		t.Errorf("the checkout index sees %q changed, want nothing", got)
	}
	out, err = w.g.run(ctx, nil, "ls-files", "--debug", "b.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "mtime: ") || strings.Contains(out, "mtime: 0:0") {
		t.Errorf("b.txt's entry has no stat data, so the update would hash it:\n%s", out)
	}
	w.release()
	if ents, _ := filepath.Glob(filepath.Join(r.GitDir, "cocoonbox-index-*")); len(ents) > 0 {
		t.Errorf("release left %v", ents)
	}
}
