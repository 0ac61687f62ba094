//go:build unix

package share

import (
	"os"
	"path/filepath"
	"testing"
)

// The fallback control directory is /tmp/cocoonbox-UID/control, a name
// any user of the machine can take first (a box user of a local box on
// the laptop's machine, say). A link planted at /tmp/cocoonbox-UID is
// refused before anything is made through it: MkdirAll made the control
// directory wherever the link led (as root, in any directory) and only
// then refused.
func TestControlDirLinkAbove(t *testing.T) {
	tmp := t.TempDir()
	target := filepath.Join(tmp, "elsewhere")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "cocoonbox-0")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := ControlDir(filepath.Join(link, "control")); err == nil {
		t.Error("a control directory under a link was taken")
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("made %s in the link's target", ents[0].Name())
	}
}
