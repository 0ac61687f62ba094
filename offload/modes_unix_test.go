//go:build unix

package offload

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDataDirModes: every file the laptop half writes in its data
// directory is 0600 and every directory 0700, whatever the umask: run
// under umask 0, where a file made with git's or Go's usual 0666 or 0644
// shows as such. The bundle was 0644 under the usual umask 022, as git
// bundle create wrote it.
func TestDataDirModes(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0))
	ctx := context.Background()
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a": "1\n"})
	s := Store{Dir: filepath.Join(t.TempDir(), "data", "cocoonbox", "offload")}
	const key = "0123456789abcdef"
	d, err := s.EnsureRepoDir(key)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := s.Lock(key)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := s.SaveRecord(&Record{ID: "1", Repo: key}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateSettings(key, r.Top, func(*RepoSettings) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := writeExcludes(filepath.Join(d, "excludes"), []string{"build/"}); err != nil {
		t.Fatal(err)
	}
	if err := writePrivate(filepath.Join(d, "env.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.bundle(ctx, filepath.Join(d, "offload.bundle"), nil); err != nil || !ok {
		t.Fatalf("bundle: %v %v", ok, err)
	}
	n := 0
	err = filepath.WalkDir(filepath.Dir(filepath.Dir(s.Dir)), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if e.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", p, fi.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("walked only %d entries", n)
	}
	if _, err := os.Stat(filepath.Join(d, "offload.bundle.lock")); err == nil {
		t.Error("git left offload.bundle.lock")
	}
}
