package gitindex

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Parse reads the indexes git writes (versions 2, 3 with extended flags,
// 4 with prefix-compressed names; SHA-1 and SHA-256), in git's order and
// with git's flags, and an index rewritten through Bytes is one git reads
// with the stat data changed.
func TestParseAndRewrite(t *testing.T) {
	for _, tc := range []struct{ name, version, format string }{
		{"v2", "2", "sha1"}, {"v3", "3", "sha1"}, {"v4", "4", "sha1"}, {"v4-sha256", "4", "sha256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			git := func(args ...string) string {
				t.Helper()
				c := exec.Command("git", args...)
				c.Dir = dir
				c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
				out, err := c.CombinedOutput()
				if err != nil {
					t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			git("init", "-q", "--object-format="+tc.format)
			for _, f := range []string{"a.txt", "dir/b.txt", "dir/sub/c.txt", "dir/sub/cc.txt", "z"} {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
				os.WriteFile(filepath.Join(dir, f), []byte(f+"\n"), 0o644)
			}
			git("add", "-A")
			git("update-index", "--index-version", tc.version)
			if tc.version == "3" {
				git("update-index", "--skip-worktree", "dir/b.txt")
			}
			p := filepath.Join(dir, ".git", "index")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			ix, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ix.Entries {
				names = append(names, string(e.Name))
				if want := string(e.Name) != "dir/b.txt" || tc.version != "3"; e.Plain() != want {
					t.Errorf("%s: Plain() = %v", e.Name, e.Plain())
				}
				if e.Mode() != 0o100644 || e.Size() != uint32(len(e.Name)+1) {
					t.Errorf("%s: mode %o size %d", e.Name, e.Mode(), e.Size())
				}
			}
			if got, want := strings.Join(names, "\n")+"\n", git("ls-files"); got != want {
				t.Errorf("entries:\n%s\nwant:\n%s", got, want)
			}
			binary.BigEndian.PutUint32(ix.Entries[0].Stat[20:], 4242) // the inode
			if err := os.WriteFile(p, ix.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			if out := git("ls-files", "--debug", "a.txt"); !strings.Contains(out, "ino: 4242") {
				t.Errorf("git reads the rewritten index as:\n%s", out)
			}
		})
	}
	if _, err := Parse([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01not an index at all, cut short")); err != ErrFormat {
		t.Errorf("a torn index: %v, want ErrFormat", err)
	}
}

// ReadBytes gives the file as it is and its mtime to the nanosecond, what
// a copy of an index must keep; a missing file is fs.ErrNotExist.
func TestReadBytes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "index")
	want := []byte("DIRC not parsed")
	os.WriteFile(p, want, 0o644)
	mtime := time.Unix(1_700_000_000, 123_456_789)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	b, got, err := ReadBytes(p)
	if err != nil || string(b) != string(want) || !got.Equal(mtime) {
		t.Fatalf("ReadBytes = %q, %v, %v; want %q, %v", b, got, err, want, mtime)
	}
	if _, _, err := ReadBytes(p + ".none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
