package localbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A local box not served by root keeps one account, its user's: account
// add and remove refuse with ErrNeedsRoot, whose line says why and what to
// do, and write nothing.
func TestAccountsNeedRoot(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 1000 }
	dir := t.TempDir()
	if _, err := AddAccount(dir, "alice", AddAccountOptions{ClaimsDir: filepath.Join(dir, "claims")}); !errors.Is(err, ErrNeedsRoot) {
		t.Fatalf("AddAccount not as root: %v, want ErrNeedsRoot", err)
	}
	if _, err := RemoveAccount(dir, "alice", RemoveAccountOptions{}); !errors.Is(err, ErrNeedsRoot) {
		t.Fatalf("RemoveAccount not as root: %v, want ErrNeedsRoot", err)
	}
	if msg := ErrNeedsRoot.Error(); !strings.Contains(msg, "served by root") || !strings.Contains(msg, "run the local box as root") || strings.Contains(msg, "\n") {
		t.Errorf("the refusal %q: want one line naming why and the next step", msg)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused add wrote %v", ents)
	}
}
