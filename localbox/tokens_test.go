package localbox

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestIssueTokenConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	toks := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tok, err := IssueToken(dir, "t", "cli")
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	ts := &tokens{path: filepath.Join(dir, "tokens.json")}
	// check records each use, written to tokens.json in the background.
	defer ts.flushes.Wait()
	for _, tok := range toks {
		if _, ok := ts.check(tok); !ok {
			t.Errorf("token %d lost by a concurrent issue", len(tok))
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		if strings.Contains(string(b), tok) {
			t.Fatal("tokens.json holds a token in clear")
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "tokens.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens.json mode %o, want 600", fi.Mode().Perm())
	}
	if _, ok := ts.check("cb_" + strings.Repeat("0", 64)); ok {
		t.Error("an unknown token was accepted")
	}
}
