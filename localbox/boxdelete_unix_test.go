//go:build unix

package localbox

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// A box user can close a directory of its own to itself (chmod 000) with
// files in it, which its own rm -rf then cannot remove: deleting the box,
// or removing the account, failed every time until root opened it by
// hand. The box user's files are now opened to it (chmod -R u+rwX, as
// the box user) before they are removed.
func TestDeleteClosedDir(t *testing.T) {
	h := newHostile(t, "")
	srv := &Server{Dir: h.state, BinDir: h.bin, User: DefaultUser, Logf: t.Logf}
	if err := srv.CreateBox("closed"); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	b, _ := srv.reg.get("", "closed")
	if err := srv.asUser(b, nil, `cd "$1" && mkdir -p d/e && touch d/e/f && chmod 000 d/e d`, b.workspace()); err != nil {
		t.Fatal(err)
	}
	if err := srv.deleteBox(b); err != nil {
		t.Errorf("deleting a box with a closed directory: %v", err)
	}
	if _, err := os.Lstat(b.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the box's directory is still there: %v", err)
	}
}
