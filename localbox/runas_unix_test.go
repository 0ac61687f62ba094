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

// The first closed directory is the one nearest /: with a 0700 directory
// and a 0700 one inside it, both closed to the box user, closedAbove names
// the outer one (the one to open first), as unreachable's line does.
func TestClosedAboveFirstFromRoot(t *testing.T) {
	u := &boxUser{name: "other", uid: 54321, gid: 54321}
	top := t.TempDir()
	os.Chmod(filepath.Dir(top), 0o755) // t.TempDir's parent, ours
	home := filepath.Join(top, "home")
	inner := filepath.Join(home, ".local", "state")
	state := filepath.Join(inner, "cocoonbox", "localbox")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(top, 0o755)
	os.Chmod(home, 0o700)
	os.Chmod(inner, 0o700)
	if d := closedAbove(state, u); d != home {
		t.Errorf("closedAbove = %q, want %s, the first 0700 directory from / down", d, home)
	}
	os.Chmod(home, 0o711)
	if d := closedAbove(state, u); d != inner {
		t.Errorf("with %s open, closedAbove = %q, want %s", home, d, inner)
	}
}

// Run by root with the box user's account (scripts/deps.sh makes it), the
// state directories the local box makes are 0711 and a directory that was
// there keeps its mode; then the real box user reaches the state directory
// through them.
func TestMkdirStateAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the 0711 directories are for a local box served by root")
	}
	u, err := lookupBoxUser(DefaultUser)
	if err != nil {
		t.Fatalf("%v (scripts/deps.sh test makes the account)", err)
	}
	top := t.TempDir()
	os.Chmod(filepath.Dir(top), 0o755)
	os.Chmod(top, 0o755)
	mine := filepath.Join(top, "mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(mine, "cocoonbox", "localbox")
	if err := MkdirState(state); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]os.FileMode{mine: 0o700, filepath.Dir(state): 0o711, state: 0o711} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %04o", d, fi.Mode().Perm(), err, want)
		}
	}
	if d := closedAbove(state, u); d != mine {
		t.Errorf("closedAbove = %q, want %s (0700, not ours to open)", d, mine)
	}
	why := unreachable(u, state, top)
	if !strings.Contains(why, "cannot search "+mine+" (0700, root's) above the state directory "+state) || !strings.Contains(why, "\nnext: "+startRecipe+"\n") {
		t.Errorf("unreachable = %q; want a line naming %s and the recipe", why, mine)
	}
	os.Chmod(mine, 0o711)
	if why := unreachable(u, state, top); why != "" {
		t.Errorf("with %s open, unreachable = %q; want \"\"", mine, why)
	}
}
