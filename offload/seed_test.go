package offload

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The index back checks the work tree against before it changes it
// takes the stat data of the real index: git then trusts in it exactly
// what it trusts in the real one. c.txt, changed with its size and mtime
// put back in a repository with core.trustctime off, is clean to git in
// the real index and so in this one (it was not hashed); a.txt, changed
// in the second of the last index write (racily clean), is read again and
// seen changed, as git status sees it.
func TestPrepareCheckoutSeedsStat(t *testing.T) {
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
	head := run(t, r.Top, env, "git", "rev-parse", "HEAD^{tree}")
	g, cleanup, err := r.prepareCheckout(context.Background(), head)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	out, err := g.run(context.Background(), nil, "diff-files", "--name-only")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out); got != "a.txt" {
		t.Errorf("the checkout index sees %q changed, want a.txt alone", got)
	}
}
