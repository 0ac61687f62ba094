package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
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

// lastMaster is the pid and socket of the last master that FILE, a
// $COCOONBOX_CONTROL_LOG, says started.
func lastMaster(file string) (int, string) {
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	m := regexp.MustCompile(`(?m)^master (\d+) serving (\S+)`).FindAllSubmatch(b, -1)
	if len(m) == 0 {
		fmt.Fprintf(os.Stderr, "%s names no master; it holds:\n%s", file, b)
		os.Exit(1)
	}
	pid, _ := strconv.Atoi(string(m[len(m)-1][1]))
	return pid, string(m[len(m)-1][2])
}

// gone reports whether pid has ended (a zombie has).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(after, "Z")
}

// killmaster FILE [TERM] kills the last master FILE names with SIGKILL
// (or SIGTERM), waits until it has gone, and prints "socket left" if its
// socket file stays.
func killmaster() {
	pid, sock := lastMaster(os.Args[1])
	p, _ := os.FindProcess(pid)
	sig := os.Kill
	if len(os.Args) > 2 && os.Args[2] == "TERM" {
		sig = syscall.SIGTERM
	}
	if err := p.Signal(sig); err != nil {
		fmt.Fprintln(os.Stderr, "killmaster:", err)
		os.Exit(1)
	}
	for !gone(pid) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Lstat(sock); err == nil {
		fmt.Println("socket left")
	}
}

// masterfds FILE prints what each open descriptor of the last master FILE
// names refers to, one a line: "FD TARGET", then "cwd DIR", its working
// directory.
func masterfds() {
	pid, _ := lastMaster(os.Args[1])
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "masterfds:", err)
		os.Exit(1)
	}
	for _, e := range ents {
		t, _ := os.Readlink(filepath.Join(dir, e.Name()))
		fmt.Println(e.Name(), t)
	}
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	fmt.Println("cwd", cwd)
}
