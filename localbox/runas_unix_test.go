//go:build unix

package localbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A box user that is not the directories' owner, nor in their group, may
// search only what others may: 0711 and 0755 yes, 0700 no.
func TestClosedAbove(t *testing.T) {
	u := &boxUser{name: "other", uid: 54321, gid: 54321}
	top := t.TempDir()
	mid := filepath.Join(top, "mid")
	state := filepath.Join(mid, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{top, mid} {
		os.Chmod(d, 0o755)
	}
	os.Chmod(filepath.Dir(top), 0o755) // t.TempDir's parent, ours
	if d := closedAbove(state, u); d != "" && !strings.HasPrefix(top, d) {
		t.Errorf("with every directory above open, %s is closed", d)
	}
	os.Chmod(mid, 0o700)
	if d := closedAbove(state, u); d != mid {
		t.Errorf("closedAbove = %q, want %s (0700)", d, mid)
	}
	os.Chmod(mid, 0o711)
	if d := closedAbove(state, u); d == mid {
		t.Errorf("%s is 0711, searchable, yet closed", mid)
	}
	// The owner needs only its own x bit.
	me := &boxUser{uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
	os.Chmod(mid, 0o700)
	if !searchable(mid, me) {
		t.Errorf("%s is 0700 and ours, yet not searchable for us", mid)
	}
}
