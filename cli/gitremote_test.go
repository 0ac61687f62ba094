package cli_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
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
