//go:build unix

package localbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/unixsock"
)

// A box's run directory is short whatever the state directory's depth
// (here about 200 bytes), made at the server's start as the box user's
// 0700 directory, and gone at its stop; the sockets a box makes there
// (tmux's, the inbox's) fit a socket's address.
func TestRunDirLifetime(t *testing.T) {
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	state := filepath.Join(dir, strings.Repeat("s", 200-len(dir)))
	srv := &Server{Dir: state, Logf: t.Logf}
	var uid int
	if os.Geteuid() == 0 {
		u, err := lookupBoxUser(DefaultUser)
		if err != nil {
			t.Fatalf("%v (scripts/deps.sh test makes it)", err)
		}
		srv.User, uid = DefaultUser, int(u.uid)
	} else {
		uid = os.Getuid()
	}
	if err := srv.CreateBox(DefaultBox); err != nil {
		t.Fatal(err)
	}
	run := RunDir(filepath.Join(state, "boxes", DefaultBox))
	if p := filepath.Join(run, "tmux-4294967295", "default"); len(p) > unixsock.Max {
		t.Errorf("tmux's socket %s is %d bytes, more than %d", p, len(p), unixsock.Max)
	}
	fi, err := os.Lstat(run)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(st.Uid) != uid {
		t.Errorf("run directory %s: %v, uid %d; want the box user's (%d) 0700 directory", run, fi.Mode(), st.Uid, uid)
	}
	srv.Stop()
	if _, err := os.Lstat(run); !os.IsNotExist(err) {
		t.Errorf("after the stop, the run directory: %v; want it gone", err)
	}
}

// The directory of the run directories is refused when it is a link, or
// a directory that others may write, and made or taken otherwise.
func TestRunBaseNotOurs(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	for _, d := range []string{link, open} {
		if err := mkdirRunBase(d); err == nil || !strings.Contains(err.Error(), d+", where the boxes' run directories go, is not a directory of this user's that only it may write") {
			t.Errorf("mkdirRunBase(%s): %v", d, err)
		}
	}
	fresh := filepath.Join(dir, "fresh")
	for range 2 {
		if err := mkdirRunBase(fresh); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Lstat(fresh); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("made %v, %v", fi, err)
	}
}
