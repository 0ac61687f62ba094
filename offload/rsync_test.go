package offload

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRsyncPattern(t *testing.T) {
	for in, want := range map[string]string{
		"node_modules/": "/node_modules/",
		".env":          "/.env",
		"a b/c":         "/a b/c",
		"x[1]*?.log":    `/x\[1]\*\?.log`,
		`back\slash`:    `/back\slash`,
		`back\sl*sh`:    `/back\\sl\*sh`,
		"new\nline":     "/new?line",
	} {
		if got := rsyncPattern(in); got != want {
			t.Errorf("rsyncPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRemotePath(t *testing.T) {
	for _, tc := range []struct{ dir, name, want string }{
		{"/workspace/app", "app", "app"},
		{"/home/u/.local/state/cocoonbox/localbox/boxes/main/workspace/app", "app", "app"},
		{"", "app", "app"},
		{"/srv/elsewhere", "app", "/srv/elsewhere"},
	} {
		if got := remotePath(tc.dir, tc.name); got != tc.want {
			t.Errorf("remotePath(%q, %q) = %q, want %q", tc.dir, tc.name, got, tc.want)
		}
	}
	for in, want := range map[string]string{"/usr/bin/cocoonbox-ssh": "/usr/bin/cocoonbox-ssh", "/my tools/cocoonbox-ssh": "'/my tools/cocoonbox-ssh'"} {
		if got, err := QuoteCommand(in); got != want || err != nil {
			t.Errorf("QuoteCommand(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := QuoteCommand("/it's/cocoonbox-ssh"); err == nil {
		t.Error("a quote in the path: accepted")
	}
}

// TestRsyncExcludes runs the real rsync with offload's arguments into a
// local copy: ignored files stay here, files named with wildcards and
// newlines are matched exactly, .git/objects never travels, and the
// copy's own ignored directories survive --delete.
func TestRsyncExcludes(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{".gitignore": "build/\n*.log\n/secret\\[1\\]\nodd*\n", "src/a.go": "package a\n"})
	writeFiles(t, r.Top, map[string]string{
		"build/out.bin": "ignored", "x.log": "ignored", "src/deep.log": "ignored", "secret[1]": "ignored",
		"secret1": "sent", "odd\nname": "ignored", "untracked.txt": "sent",
	})
	ignored, err := r.ignored(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "copy")
	writeFiles(t, dest, map[string]string{"target/debug/app": "the box's own build", "stale.txt": "deleted by --delete"})
	ex := filepath.Join(t.TempDir(), "excludes")
	if err := writeExcludes(ex, append(ignored, "target/")); err != nil {
		t.Fatal(err)
	}
	args := append(rsyncArgs(ex, false), r.Top+"/", dest+"/")
	if _, err := runRsync(ctx, env, args); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for p := range files(t, dest) {
		got[p] = true
	}
	filepath.WalkDir(filepath.Join(dest, ".git"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "objects" {
			got[".git/objects/"] = true
		}
		return nil
	})
	want := map[string]bool{".gitignore": true, "src/a.go": true, "secret1": true, "untracked.txt": true, "target/debug/app": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the copy (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dest, ".git", "HEAD")); err != nil {
		t.Errorf(".git without objects should travel: %v", err)
	}
}

func TestMeasure(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{".gitignore": "big\n", "a": "12345"})
	writeFiles(t, r.Top, map[string]string{"big": string(make([]byte, 1<<20))})
	n, err := r.measure(context.Background(), env, []string{"big"})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 || n > 1<<19 {
		t.Errorf("measured %d bytes: the ignored file counted, or nothing did", n)
	}
	// Without a usable rsync, the work tree's files are summed: .gitignore
	// and a, 4 and 5 bytes.
	if n, err := r.fileSizes(context.Background()); err != nil || n != 9 {
		t.Errorf("file sizes: %d, %v; want 9", n, err)
	}
}

// TestRsyncGitLocks: git's lock files never travel, so the box's git is
// not locked out by a lock a laptop git holds.
func TestRsyncGitLocks(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	writeFiles(t, r.GitDir, map[string]string{"index.lock": "held", "refs/heads/main.lock": "held", "HEAD.lock": "held"})
	dest := filepath.Join(t.TempDir(), "copy")
	ex := filepath.Join(t.TempDir(), "excludes")
	if err := writeExcludes(ex, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := runRsync(ctx, env, append(rsyncArgs(ex, false), r.Top+"/", dest+"/")); err != nil {
		t.Fatal(err)
	}
	var locks []string
	filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err == nil && filepath.Ext(p) == ".lock" {
			locks = append(locks, p)
		}
		return nil
	})
	if len(locks) > 0 {
		t.Errorf("lock files in the copy: %v", locks)
	}
	if _, err := os.Stat(filepath.Join(dest, ".git", "HEAD")); err != nil {
		t.Errorf(".git should travel: %v", err)
	}
}
