//go:build linux

package boxagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A copy made as rsync -a makes it (cp -a: new inodes and ctimes, the
// same sizes and mtimes) with the laptop's index: restat gives the
// untouched entries the copy's stat data, and leaves alone the two edits
// that stat data cannot show: r.txt, edited in the second of the last
// index write (racily clean), and m.txt, edited with its mtime put back,
// which the laptop's git tells by ctime alone. The copy still equals S,
// and git status in it sees both edits.
func TestRefreshCopyRestat(t *testing.T) {
	for _, v := range []string{"2", "4"} {
		t.Run("index-version-"+v, func(t *testing.T) { testRefreshCopyRestat(t, v) })
	}
}

func testRefreshCopyRestat(t *testing.T, version string) {
	laptop := filepath.Join(t.TempDir(), "laptop")
	cfg := &Config{Environ: append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())}
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := cfg.git(dir, nil, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	if err := os.MkdirAll(laptop, 0o755); err != nil {
		t.Fatal(err)
	}
	git(laptop, "init", "-q")
	t0 := time.Date(2020, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	t1 := t0.Add(100 * time.Second)
	write := func(dir, name, s string, mt time.Time) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		write(laptop, "f"+strconv.Itoa(i)+".txt", "file "+strconv.Itoa(i)+"\n", t0)
	}
	write(laptop, "m.txt", "M\n", t0)
	write(laptop, "r.txt", "R\n", t1)
	git(laptop, "add", "-A")
	git(laptop, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init")
	git(laptop, "update-index", "--index-version", version)
	// The index was written half a second after r.txt, in its second.
	idx := filepath.Join(laptop, ".git", "index")
	if err := os.Chtimes(idx, t1.Add(300*time.Millisecond), t1.Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	write(laptop, "r.txt", "S\n", t1)
	// A ctime in a later second than the entry's (git may compare whole
	// seconds only).
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	write(laptop, "m.txt", "N\n", t0)
	s, err := cfg.snapshotCommit(laptop, "refs/cocoonbox/offload/o1", "S")
	if err != nil {
		t.Fatal(err)
	}
	if got := git(laptop, "show", s+":m.txt") + git(laptop, "show", s+":r.txt"); got != "NS" {
		t.Fatalf("the laptop's S has m.txt, r.txt %q, want N and S", got)
	}

	box := filepath.Join(t.TempDir(), "box")
	if out, err := exec.Command("cp", "-a", laptop, box).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	saved := saveIndex(box)
	n, err := restatIndex(box)
	if err != nil {
		t.Fatal(err)
	}
	if n != 21 { // f0..f19 and m.txt; not r.txt
		t.Errorf("restated %d entries, want 21", n)
	}
	// f0.txt's entry now has the copy's inode.
	var st syscall.Stat_t
	syscall.Lstat(filepath.Join(box, "f0.txt"), &st)
	if dbg := git(box, "ls-files", "--debug", "f0.txt"); !strings.Contains(dbg, "ino: "+strconv.FormatUint(uint64(uint32(st.Ino)), 10)) {
		t.Errorf("f0.txt's entry has not the copy's inode %d:\n%s", st.Ino, dbg)
	}
	if err := saved.restore(); err != nil {
		t.Fatal(err)
	}

	if err := cfg.refreshCopy(box, s, true); err != nil {
		t.Fatalf("refreshCopy: %v", err)
	}
	if got := git(box, "status", "--porcelain"); got != "M m.txt\n M r.txt" {
		t.Errorf("git status in the copy:\n%s\nwant m.txt and r.txt modified", got)
	}
}
