//go:build unix

package localbox

import (
	"os"
	"path/filepath"
	"testing"
)

// purge's removal of a box directory (removeBoxAsOwner, as root) meets
// links planted where a container box's exec directories and socket are
// (execGuard, execDir, its exec.sock) and where its trust copies are
// (trustDir, a copy): it removes the links and nothing through them,
// whatever they point at. The trust directory's copies, root's, go with
// it ("trust": a purge failed on them for ever).
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
		{"trust", func(t *testing.T, dir, target string) []string {
			mkdir(t, filepath.Join(dir, "trust"), 0o755)
			for _, v := range trustFileVars {
				writeFile(t, filepath.Join(dir, "trust", trustName(v)), "CA")
			}
			return nil
		}},
		{"trust as a link", func(t *testing.T, dir, target string) []string {
			symlink(t, target, filepath.Join(dir, "trust"))
			return []string{"ca.pem", "box", "box/exec.sock"}
		}},
		{"trust/ssl_cert_file.pem as a link", func(t *testing.T, dir, target string) []string {
			mkdir(t, filepath.Join(dir, "trust"), 0o755)
			symlink(t, filepath.Join(target, "ca.pem"), filepath.Join(dir, "trust", trustName("SSL_CERT_FILE")))
			symlink(t, target, filepath.Join(dir, "trust", trustName("NODE_EXTRA_CA_CERTS")))
			return []string{"ca.pem", "box", "box/exec.sock"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			target := filepath.Join(top, "elsewhere")
			mkdir(t, target, 0o755)
			mkdir(t, filepath.Join(target, "box"), 0o755)
			writeFile(t, filepath.Join(target, "box", "exec.sock"), "keep")
			writeFile(t, filepath.Join(target, "ca.pem"), "keep")
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

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
