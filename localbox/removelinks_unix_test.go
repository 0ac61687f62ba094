//go:build unix

package localbox

import (
	"os"
	"path/filepath"
	"testing"
)

// purge's removal of a box directory (removeBoxAsOwner, as root) meets
// links planted where a container box's exec directories and socket are
// (execGuard, execDir, its exec.sock): it removes the links and nothing
// through them, whatever they point at.
func TestPurgeExecDirsFollowNoLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("purge removes a box directory as root")
	}
	for _, tc := range []struct {
		name string
		// plant makes the box's exec directories in dir with a link
		// somewhere to target, a directory holding box/exec.sock (a
		// file), and returns what of target must stay.
		plant func(t *testing.T, dir, target string) []string
	}{
		{"exec", func(t *testing.T, dir, target string) []string {
			symlink(t, target, filepath.Join(dir, "exec"))
			return []string{"box", "box/exec.sock"}
		}},
		{"exec/box", func(t *testing.T, dir, target string) []string {
			mkdir(t, filepath.Join(dir, "exec"), 0o700)
			symlink(t, filepath.Join(target, "box"), filepath.Join(dir, "exec", "box"))
			return []string{"box", "box/exec.sock"}
		}},
		{"exec/box/exec.sock", func(t *testing.T, dir, target string) []string {
			mkdir(t, filepath.Join(dir, "exec"), 0o700)
			mkdir(t, filepath.Join(dir, "exec", "box"), 0o711)
			symlink(t, filepath.Join(target, "box", "exec.sock"), filepath.Join(dir, "exec", "box", execSockName))
			return []string{"box", "box/exec.sock"}
		}},
		// A container box's copies of the machine's CA files (root's):
		// removed, and a link among them or at trust/ is not followed.
		{"trust", func(t *testing.T, dir, target string) []string {
			mkdir(t, filepath.Join(dir, "trust"), 0o755)
			if err := os.WriteFile(filepath.Join(dir, "trust", "ssl_cert_file.pem"), []byte("CA"), 0o644); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(target, "box"), filepath.Join(dir, "trust", "planted"))
			return []string{"box", "box/exec.sock"}
		}},
		{"trust link", func(t *testing.T, dir, target string) []string {
			symlink(t, filepath.Join(target, "box"), filepath.Join(dir, "trust"))
			return []string{"box", "box/exec.sock"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			target := filepath.Join(top, "elsewhere")
			mkdir(t, target, 0o755)
			mkdir(t, filepath.Join(target, "box"), 0o755)
			if err := os.WriteFile(filepath.Join(target, "box", "exec.sock"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			// A container box's directory: root's parts, empty.
			dir := filepath.Join(top, "boxes", "main")
			mkdir(t, filepath.Dir(dir), 0o711)
			mkdir(t, dir, 0o711)
			for _, p := range []string{"home", "workspace"} {
				mkdir(t, filepath.Join(dir, p), 0o755)
			}
			keep := tc.plant(t, dir, target)
			err := removeBoxAsOwner(dir)
			for _, k := range keep {
				if _, serr := os.Lstat(filepath.Join(target, k)); serr != nil {
					t.Errorf("the link's target lost %s: %v (purge: %v)", k, serr, err)
				}
			}
			if err != nil {
				t.Fatalf("purge of the box directory: %v", err)
			}
			if _, err := os.Lstat(dir); err == nil {
				t.Errorf("%s is left", dir)
			}
		})
	}
}

func symlink(t *testing.T, old, new string) {
	t.Helper()
	if err := os.Symlink(old, new); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, d string, perm os.FileMode) {
	t.Helper()
	if err := os.Mkdir(d, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, perm); err != nil {
		t.Fatal(err)
	}
}
