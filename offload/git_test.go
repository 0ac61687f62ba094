package offload

import (
	"context"
	"testing"
)

// revs resolves many revision expressions with one git: an object name
// for each that names one, "" for each that does not, in order.
func TestRevs(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	head := run(t, r.Top, env, "git", "rev-parse", "HEAD")
	tree := run(t, r.Top, env, "git", "rev-parse", "HEAD^{tree}")
	got, err := r.git.revs(context.Background(), "HEAD^{commit}", "HEAD^1", "HEAD^{tree}", "refs/cocoonbox/none", tree+"^{commit}", "HEAD:a.txt")
	if err != nil {
		t.Fatal(err)
	}
	blob := run(t, r.Top, env, "git", "rev-parse", "HEAD:a.txt")
	want := []string{head, "", tree, "", "", blob}
	if len(got) != len(want) {
		t.Fatalf("revs = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("revs[%d] = %q, want %q", i, got[i], want[i])
		}
	}
	if _, err := r.git.revs(context.Background(), "HEAD\nHEAD"); err == nil {
		t.Error("revs took an expression of two lines")
	}
}
