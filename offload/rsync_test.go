package offload

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	dest := copyDest(t)
	writeFiles(t, dest, map[string]string{"target/debug/app": "the box's own build", "stale.txt": "deleted by --delete"})
	ex := filepath.Join(t.TempDir(), "excludes")
	if err := writeExcludes(ex, append(ignored, "target/")); err != nil {
		t.Fatal(err)
	}
	rs := localRsync(t, env)
	if err := (&Offloader{Laptop: Laptop{Repo: r, Environ: env, Shim: "false"}}).sync(ctx, rs, ex, dest, syncOpts{compress: true}); err != nil {
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
	n, err := r.measure(context.Background(), localRsync(t, env), env, []string{"big"})
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
// not locked out by a lock a laptop git holds, and the box's own stay.
// .git goes by its own pass beside the work tree's: what this repository
// no longer has goes from the copy's .git too, but for its objects.
func TestRsyncGitLocks(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	writeFiles(t, r.GitDir, map[string]string{"index.lock": "held", "refs/heads/main.lock": "held", "HEAD.lock": "held"})
	dest := copyDest(t)
	writeFiles(t, dest, map[string]string{".git/packed-refs.lock": "the box's", ".git/refs/heads/gone": "a branch deleted here",
		".git/objects/ab/cdef": "the box's object", "stale.txt": "deleted here"})
	ex := filepath.Join(t.TempDir(), "excludes")
	if err := writeExcludes(ex, nil); err != nil {
		t.Fatal(err)
	}
	rs := localRsync(t, env)
	if err := (&Offloader{Laptop: Laptop{Repo: r, Environ: env, Shim: "false"}}).sync(ctx, rs, ex, dest, syncOpts{compress: true}); err != nil {
		t.Fatal(err)
	}
	var locks []string
	filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err == nil && filepath.Ext(p) == ".lock" {
			locks = append(locks, p)
		}
		return nil
	})
	if want := []string{filepath.Join(dest, ".git", "packed-refs.lock")}; !slices.Equal(locks, want) {
		t.Errorf("lock files in the copy: %v, want only the box's own %v", locks, want)
	}
	for _, p := range []string{".git/HEAD", ".git/config", ".git/objects/ab/cdef", "a.txt"} {
		if _, err := os.Stat(filepath.Join(dest, p)); err != nil {
			t.Errorf("%s should be in the copy: %v", p, err)
		}
	}
	for _, p := range []string{".git/refs/heads/gone", "stale.txt"} {
		if _, err := os.Lstat(filepath.Join(dest, p)); err == nil {
			t.Errorf("%s should have gone from the copy", p)
		}
	}
}

// TestRsyncObjects: a first offload's passes send .git/objects as it is,
// without git's temporary files, and the rest of .git by content.
func TestRsyncObjects(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	run(t, r.Top, env, "git", "gc", "-q")
	writeFiles(t, r.GitDir, map[string]string{"objects/pack/tmp_pack_x": "being written", "objects/incoming-x/y": "a push's quarantine"})
	dest := copyDest(t)
	ex := filepath.Join(t.TempDir(), "excludes")
	if err := writeExcludes(ex, nil); err != nil {
		t.Fatal(err)
	}
	if err := (&Offloader{Laptop: Laptop{Repo: r, Environ: env, Shim: "false"}}).sync(ctx, localRsync(t, env), ex, dest, syncOpts{objects: true}); err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(dest, ".git", "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Errorf("packs in the copy: %v, want the one here", packs)
	}
	for _, p := range []string{"objects/pack/tmp_pack_x", "objects/incoming-x"} {
		if _, err := os.Lstat(filepath.Join(dest, ".git", p)); err == nil {
			t.Errorf(".git/%s travelled", p)
		}
	}
	if out := strings.TrimSpace(run(t, dest, env, "git", "log", "--format=%s")); out != "init" {
		t.Errorf("git log in the copy: %q", out)
	}
}

// localRsync is this machine's rsync, which must be one offload takes.
func localRsync(t *testing.T, env []string) *Rsync {
	t.Helper()
	rs, err := FindRsync(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestRsyncVariants: each recorded `rsync --version` (testdata/rsync-version,
// README there says where each came from) is told apart, and gets the
// argv its rsync takes; portable openrsync is refused naming the fix.
func TestRsyncVariants(t *testing.T) {
	// rsync 3 sends the file list whole (--no-inc-recursive); the
	// others have no incremental recursion, nor the option.
	sync3 := []string{"-az", "--no-inc-recursive", "--delete", "--exclude-from=EX", "--exclude=/.git/objects/", "--exclude=/.git/**.lock"}
	sync := []string{"-az", "--delete", "--exclude-from=EX", "--exclude=/.git/objects/", "--exclude=/.git/**.lock"}
	git3 := []string{"-a", "--no-inc-recursive", "--checksum", "--delete", "--exclude=/.git/objects/", "--exclude=**.lock"}
	tests := []struct {
		file, variant, version string
		protocol               int
		sync, git, measure     []string
		refuse                 string
	}{
		{file: "rsync-3.5.0-debian12.txt", variant: Rsync3, version: "3.5.0", protocol: 32,
			sync: sync3, git: git3, measure: []string{"--dry-run", "--stats", "--no-human-readable"}},
		{file: "rsync-3.4.1-macos-build.txt", variant: Rsync3, version: "3.4.1", protocol: 32,
			sync: sync3, git: git3, measure: []string{"--dry-run", "--stats", "--no-human-readable"}},
		{file: "rsync-3.2.7-homebrew-macos13.txt", variant: Rsync3, version: "3.2.7", protocol: 31,
			sync: sync3, git: git3, measure: []string{"--dry-run", "--stats", "--no-human-readable"}},
		{file: "rsync-2.6.9-apple-macos13.txt", variant: Rsync269, version: "2.6.9", protocol: 29,
			sync: sync, git: []string{"-a", "--checksum", "--delete", "--exclude=/.git/objects/", "--exclude=**.lock"}, measure: []string{"--dry-run", "--stats"}},
		{file: "openrsync-apple-macos15.txt", variant: AppleOpenrsync, version: "2.6.9", protocol: 29,
			sync: sync, git: []string{"-a", "-I", "--delete", "--exclude=/.git/objects/", "--exclude=**.lock"}, measure: nil},
		{file: "openrsync-portable.txt", refuse: "OpenBSD's portable openrsync (protocol 27), whose --checksum offload cannot use: install rsync 3 (brew install rsync on a Mac) or put Apple's /usr/bin/rsync first on PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "rsync-version", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			rs, err := ParseRsyncVersion(string(b))
			if tt.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refuse) {
					t.Fatalf("got %+v, %v; want the refusal %q", rs, err, tt.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rs.Variant != tt.variant || rs.Version != tt.version || rs.Protocol != tt.protocol {
				t.Errorf("got %s %s protocol %d, want %s %s protocol %d", rs.Variant, rs.Version, rs.Protocol, tt.variant, tt.version, tt.protocol)
			}
			if diff := cmp.Diff(tt.sync, rs.syncArgs("EX", syncOpts{compress: true})); diff != "" {
				t.Errorf("sync args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(append(slices.Clone(tt.sync[:len(tt.sync)-2]), "--exclude=/.git"), rs.syncArgs("EX", syncOpts{compress: true, noGit: true})); diff != "" {
				t.Errorf("linked sync args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.git, rs.gitArgs(nil)); diff != "" {
				t.Errorf(".git pass args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.measure, rs.measureArgs()); diff != "" {
				t.Errorf("measure args (-want +got):\n%s", diff)
			}
		})
	}
	for _, out := range []string{"", "rsync  version 2.6.3  protocol version 28\n", "bash: rsync: command not found\n"} {
		if rs, err := ParseRsyncVersion(out); err == nil || !strings.Contains(err.Error(), "brew install rsync") {
			t.Errorf("ParseRsyncVersion(%q) = %+v, %v; want a refusal naming brew install rsync", out, rs, err)
		}
	}
}

// TestRsyncChoices: the algorithms both rsyncs of a pass would agree on
// (each side's most preferred that the other lists) are named up front,
// read from each side's --version (testdata/rsync-version), so that
// rsync 3.2 does not negotiate them; nothing is named when either side
// lists none.
func TestRsyncChoices(t *testing.T) {
	version := func(file string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "rsync-version", file))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	laptop := func(file string) *Rsync {
		rs, err := ParseRsyncVersion(version(file))
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	for _, tt := range []struct {
		laptop, box string
		compress    bool
		want        []string
	}{
		{"rsync-3.5.0-debian12.txt", "rsync-3.2.7-homebrew-macos13.txt", false, []string{"--checksum-choice=xxh128"}},
		{"rsync-3.5.0-debian12.txt", "rsync-3.2.7-homebrew-macos13.txt", true, []string{"--checksum-choice=xxh128", "--compress-choice=zstd"}},
		// A box rsync built without xxhash: md5, as they would agree.
		{"rsync-3.5.0-debian12.txt", "rsync-3.4.1-macos-build.txt", false, []string{"--checksum-choice=md5"}},
		{"rsync-3.4.1-macos-build.txt", "rsync-3.5.0-debian12.txt", false, []string{"--checksum-choice=md5"}},
		// A box rsync older than 3.2, or none: rsync negotiates.
		{"rsync-3.5.0-debian12.txt", "rsync-2.6.9-apple-macos13.txt", false, nil},
		{"rsync-3.5.0-debian12.txt", "", false, nil},
		{"rsync-2.6.9-apple-macos13.txt", "rsync-3.5.0-debian12.txt", false, nil},
	} {
		box := ""
		if tt.box != "" {
			box = version(tt.box)
		}
		if got := laptop(tt.laptop).choices(box, tt.compress); !slices.Equal(got, tt.want) {
			t.Errorf("%s to %s, compress %v: %q, want %q", tt.laptop, tt.box, tt.compress, got, tt.want)
		}
	}
	if sums, zips := rsyncLists(version("rsync-3.5.0-debian12.txt")); !slices.Equal(sums, []string{"xxh128", "xxh3", "xxh64", "md5", "md4", "sha1", "none"}) || !slices.Equal(zips, []string{"zstd", "lz4", "zlibx", "zlib", "none"}) {
		t.Errorf("lists %q %q", sums, zips)
	}
}

// copyDest is a box copy's directory, made as begin makes it before the
// passes run: two passes side by side into one that does not exist both
// try to make it, and the loser's rsync fails (code 11, mkdir failed).
func copyDest(t *testing.T) string {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "copy")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	return dest
}

func TestShellLine(t *testing.T) {
	lost := "cocoonbox-ssh: exec in main: the connection to https://b:1 was lost while the command ran (x)"
	for _, tc := range []struct {
		name, stderr, want string
	}{
		{"lost", lost + "\nfatal: early EOF\nfatal: index-pack failed\n", lost},
		{"after notices", "cocoonbox-ssh: connection to main lost; reconnecting\r\n" + lost + "\r\nfatal: early EOF\n", lost},
		// A command that failed in the box after a resume: its own line.
		{"notice last", "cocoonbox-ssh: connection to main lost; reconnecting\ncocoonbox-ssh: resumed after 1 s\nfatal: 'x' does not appear to be a git repository\n", ""},
		{"none", "fatal: the remote end hung up unexpectedly\n", ""},
	} {
		if got := shellLine("'/opt/bin/cocoonbox-ssh'", tc.stderr); got != tc.want {
			t.Errorf("%s: shellLine = %q, want %q", tc.name, got, tc.want)
		}
	}
}
