package cli_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// fakehistory COMMITS FILES OUT writes to OUT a git fast-import stream for
// branch main: a first commit with FILES files in directories of 50, then
// COMMITS-1 commits that each append a line to three of them. The content
// is pseudo-random but the same on every run.
func fakehistory() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: fakehistory COMMITS FILES OUT")
		os.Exit(2)
	}
	commits, err1 := strconv.Atoi(os.Args[1])
	files, err2 := strconv.Atoi(os.Args[2])
	if err1 != nil || err2 != nil || commits < 1 || files < 1 {
		fmt.Fprintln(os.Stderr, "fakehistory: COMMITS and FILES are positive numbers")
		os.Exit(2)
	}
	f, err := os.Create(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriter(f)
	writeHistory(w, commits, files)
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func writeHistory(w *bufio.Writer, commits, files int) {
	rng := rand.New(rand.NewPCG(1, 2))
	content := make([][]byte, files)
	line := func() []byte { return fmt.Appendf(nil, "%016x %016x %d\n", rng.Uint64(), rng.Uint64(), rng.IntN(1000)) }
	for i := range content {
		for range 8 {
			content[i] = append(content[i], line()...)
		}
	}
	path := func(i int) string { return fmt.Sprintf("d%03d/f%05d.txt", i/50, i) }
	modify := func(i int) {
		fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", path(i), len(content[i]), content[i])
	}
	for c := range commits {
		when := 1700000000 + int64(c)*60
		msg := fmt.Sprintf("commit %d", c)
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter Test <test@example.com> %d +0000\ndata %d\n%s\n", when, len(msg), msg)
		if c == 0 {
			for i := range files {
				modify(i)
			}
			continue
		}
		for range 3 {
			i := rng.IntN(files)
			content[i] = append(content[i], line()...)
			modify(i)
		}
	}
}

// BenchmarkGitClone clones a repository of 3000 commits and 4000 files
// from a local box with git-remote-cocoonbox, and with git's ssh transport
// through cocoonbox-ssh, the same box and the same git-upload-pack.
func BenchmarkGitClone(b *testing.B) {
	bin, err := exec.LookPath("git-remote-cocoonbox")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	state := filepath.Join(dir, "state")
	srv := &localbox.Server{Dir: state, BinDir: filepath.Dir(bin)}
	if err := srv.CreateBox(localbox.DefaultBox); err != nil {
		b.Fatal(err)
	}
	lis, url, err := localbox.Listen(state, "")
	if err != nil {
		b.Fatal(err)
	}
	tok, err := localbox.IssueToken(state, "bench", "cli")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	b.Cleanup(srv.Stop)

	env := append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"COCOONBOX_ENDPOINT="+url, "COCOONBOX_TOKEN="+tok, "GIT_SSH_COMMAND=cocoonbox-ssh")
	git := func(stdin io.Reader, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Env, cmd.Dir, cmd.Stdin = env, dir, stdin
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var stream bytes.Buffer
	w := bufio.NewWriter(&stream)
	writeHistory(w, 3000, 4000)
	w.Flush()
	git(nil, "init", "-q", "--bare", "big.git")
	git(&stream, "-C", "big.git", "fast-import", "--quiet")
	ws := filepath.Join(state, "boxes", localbox.DefaultBox, "workspace")
	git(nil, "clone", "-q", "--bare", "--no-local", "big.git", filepath.Join(ws, "big.git"))

	for _, bc := range []struct{ name, url string }{
		{"helper", "cocoonbox::main/big.git"},
		{"ssh-shim", "main:big.git"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				to := fmt.Sprintf("%s-%d.git", bc.name, i)
				git(nil, "clone", "-q", "--bare", bc.url, to)
				os.RemoveAll(filepath.Join(dir, to))
			}
		})
	}
}
