package cli_test

import (
	"fmt"
	"os"
	"regexp"
	"time"
)

// waitlog FILE REGEXP [N] waits until FILE has at least N lines (default 1)
// matching REGEXP, at most two minutes: a control master, which runs in
// the background, logs what it does to $COCOONBOX_CONTROL_LOG.
func waitlog() {
	if len(os.Args) != 3 && len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: waitlog FILE REGEXP [N]")
		os.Exit(2)
	}
	re, err := regexp.Compile("(?m)" + os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "waitlog:", err)
		os.Exit(2)
	}
	n := 1
	if len(os.Args) == 4 {
		fmt.Sscan(os.Args[3], &n)
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(os.Args[1]); err == nil && len(re.FindAll(b, -1)) >= n {
			return
		}
	}
	b, _ := os.ReadFile(os.Args[1])
	fmt.Fprintf(os.Stderr, "waitlog: %s has no %d lines matching %s; it holds:\n%s", os.Args[1], n, os.Args[2], b)
	os.Exit(1)
}
