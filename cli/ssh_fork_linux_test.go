package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// forkClients are the three ways to run ssh -f side by side, each
// test's own: OpenSSH's ssh with a real sshd (the reference), OpenSSH's
// ssh through cocoonbox-ssh --stdio, and cocoonbox-ssh itself, the last
// two with a local box.
func forkClients(t *testing.T) []boxClient {
	b := startBox(t)
	d := startSSHD(t)
	return append([]boxClient{{"ssh with sshd", func(args []string, command ...string) *exec.Cmd {
		return exec.Command("ssh", append(append(append([]string{"-F", d.Config, "-p", d.Port}, args...), d.User+"@127.0.0.1"), command...)...)
	}, func(l string) string { return l + "\r\n" }}}, boxClients(t, b)...)
}

// TestSSHForkForward: ssh -f -N -L, through each client, returns 0 with
// nothing on stdout or stderr, leaves one process in a session of its own
// with stdin, stdout and stderr on /dev/null (ssh's fork_postauth; so a
// caller reading them to their end, as $(...) does, is not held), and
// the forward then carries bytes. Files, not pipes, take the output:
// OpenSSH's ProxyCommand (cocoonbox-ssh --stdio) keeps ssh's first
// stderr for as long as it runs.
func TestSSHForkForward(t *testing.T) {
	t.Parallel()
	echo := echoTarget(t)
	for _, c := range forkClients(t) {
		lp, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		spec := lp + ":127.0.0.1:" + echo
		got := runFiles(t, c.cmd([]string{"-f", "-N", "-o", "ExitOnForwardFailure=yes", "-L", spec}))
		pid := forked(t, spec)
		if got != (result{}) {
			t.Errorf("%s -f -N -L %s: got %+v, want exit 0 and no output", c.name, spec, got)
		}
		checkDetached(t, c.name, pid, 0, 1, 2)
		echoThrough(t, "tcp", "127.0.0.1:"+lp)
	}
}

// TestSSHForkCommand: ssh -f HOST COMMAND, through each client, returns
// 0 while the command waits for a file the test then makes (so the
// command runs in the background: without -f the call would never
// return); the command's stdout and stderr still reach the files the
// call was given, while the process's own descriptors 0 and 1 are
// /dev/null, as ssh's.
func TestSSHForkCommand(t *testing.T) {
	t.Parallel()
	for _, c := range forkClients(t) {
		dir := openDir(t)
		gate, done := filepath.Join(dir, "go"), filepath.Join(dir, "done")
		line := "while [ ! -e " + gate + " ]; do sleep 0.1; done; echo done > " + done + "; echo out; echo err >&2"
		stdout, stderr := createFile(t, filepath.Join(dir, "stdout")), createFile(t, filepath.Join(dir, "stderr"))
		cmd := c.cmd([]string{"-f"}, line)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s -f: %v; stderr: %s", c.name, err, readFile(t, stderr.Name()))
		}
		if _, err := os.Stat(done); !os.IsNotExist(err) {
			t.Fatalf("%s -f: %s exists before the command was let go: %v", c.name, done, err)
		}
		pid := forked(t, gate)
		checkDetached(t, c.name, pid, 0, 1)
		write(t, gate, "")
		waitFor(t, nil, func() bool { return !alive(pid) })
		if got := readFile(t, done); got != "done\n" {
			t.Errorf("%s -f: %s holds %q", c.name, done, got)
		}
		if got, want := readFile(t, stdout.Name())+readFile(t, stderr.Name()), "out\nerr\n"; got != want {
			t.Errorf("%s -f: stdout and stderr got %q, want %q", c.name, got, want)
		}
	}
}

// TestSSHForkKeepsStdin: -o ForkAfterAuthentication=yes, unlike -f, is
// not -n, through each client as with sshd: the background command reads
// the call's stdin to its end.
func TestSSHForkKeepsStdin(t *testing.T) {
	t.Parallel()
	for _, c := range forkClients(t) {
		dir := openDir(t)
		in, got := filepath.Join(dir, "stdin"), filepath.Join(dir, "got")
		write(t, in, "from stdin\n")
		stdin, err := os.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		cmd := c.cmd([]string{"-o", "ForkAfterAuthentication=yes"}, "cat > "+got+".tmp && mv "+got+".tmp "+got)
		cmd.Stdin = stdin
		if r := runFiles(t, cmd); r != (result{}) {
			t.Fatalf("%s: got %+v, want exit 0 and no output", c.name, r)
		}
		waitFor(t, nil, func() bool { _, err := os.Stat(got); return err == nil })
		if s := readFile(t, got); s != "from stdin\n" {
			t.Errorf("%s: the command read %q", c.name, s)
		}
	}
}

// TestSSHForkFailures: what ssh -f refuses or fails at, it says in the
// foreground, with 255, through each client as with sshd: no command and
// no -N (OpenSSH's line, ours with our prefix), and, with
// ExitOnForwardFailure, a -R port in use (the remote forwards are
// awaited before going to the background) or an -L one; and no process
// is left behind.
func TestSSHForkFailures(t *testing.T) {
	t.Parallel()
	port := usedPort(t)
	const noCommand = "Cannot fork into background without a command to execute."
	reason := "listen on 127.0.0.1:" + port + " in box main: address already in use"
	for _, c := range forkClients(t) {
		ours := c.name == "cocoonbox-ssh"
		for _, args := range [][]string{{"-f"}, {"-o", "ForkAfterAuthentication=yes"}, {"-f", "-n", "-T"}} {
			want := result{Code: 255, Stderr: noCommand + "\r\n"}
			if ours {
				want.Stderr = c.ours(noCommand)
			}
			if got := runResult(c.cmd(args)); got != want {
				t.Errorf("%s %q: got %+v, want %+v", c.name, args, got, want)
			}
		}

		spec := "127.0.0.1:" + port + ":localhost:9"
		got := runResult(c.cmd([]string{"-f", "-N", "-o", "ExitOnForwardFailure=yes", "-R", spec}))
		want := result{Code: 255, Stderr: "Error: remote port forwarding failed for listen port " + port + "\r\n"}
		switch c.name {
		case "ssh --stdio":
			want.Stderr = c.ours("remote forwarding: "+reason) + want.Stderr
		case "cocoonbox-ssh":
			want.Stderr = c.ours("remote port forwarding failed for listen port " + port + ": " + reason)
		}
		if got != want {
			t.Errorf("%s -f -N -R %s: got %+v, want %+v", c.name, spec, got, want)
		}
		if pids := sshProcesses(t, spec); len(pids) > 0 {
			t.Errorf("%s -f -N -R %s: processes %v are left", c.name, spec, pids)
		}

		// A bind address: with none, ssh (and we) listen on ::1 as well and
		// take one socket as enough.
		spec = "127.0.0.1:" + port + ":127.0.0.1:9"
		got = runResult(c.cmd([]string{"-f", "-o", "ExitOnForwardFailure=yes", "-L", spec}, "echo ran"))
		if got.Code != 255 || got.Stdout != "" || !strings.Contains(got.Stderr, port) {
			t.Errorf("%s -f -L %s (in use) echo ran: got %+v, want 255 and a line naming the port", c.name, spec, got)
		}
		if ours && got.Stderr != c.ours("-L [127.0.0.1]:"+port+": listen tcp4 127.0.0.1:"+port+": bind: address already in use") {
			t.Errorf("%s -f -L %s: stderr %q", c.name, spec, got.Stderr)
		}
		if pids := sshProcesses(t, spec); len(pids) > 0 {
			t.Errorf("%s -f -L %s: processes %v are left", c.name, spec, pids)
		}
	}
}

// openDir is a temporary directory every user may write to, for the
// commands of sshd's user and the box's.
func openDir(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runFiles runs c with stdout and stderr to files, and returns what it did.
func runFiles(t *testing.T, c *exec.Cmd) result {
	t.Helper()
	dir := t.TempDir()
	c.Stdout, c.Stderr = createFile(t, filepath.Join(dir, "stdout")), createFile(t, filepath.Join(dir, "stderr"))
	c.Run()
	return result{Stdout: readFile(t, filepath.Join(dir, "stdout")), Stderr: readFile(t, filepath.Join(dir, "stderr")), Code: c.ProcessState.ExitCode()}
}

func createFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// forked is the one ssh or cocoonbox-ssh process whose arguments hold
// token, which the test kills (SIGTERM, then waits) when it ends.
func forked(t *testing.T, token string) int {
	t.Helper()
	pids := sshProcesses(t, token)
	if len(pids) != 1 {
		t.Fatalf("processes of ssh or cocoonbox-ssh with %q: %v, want one in the background", token, pids)
	}
	pid := pids[0]
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGTERM)
		waitFor(t, nil, func() bool { return !alive(pid) })
	})
	return pid
}

// sshProcesses are the live processes named ssh or cocoonbox-ssh with an
// argument holding token, read from /proc.
func sshProcesses(t *testing.T, token string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if name := filepath.Base(args[0]); name != "ssh" && name != "cocoonbox-ssh" {
			continue
		}
		for _, a := range args[1:] {
			if strings.Contains(a, token) && alive(pid) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// checkDetached checks that process pid comes to lead a session of its
// own, as after daemon(3), with its descriptors fds on /dev/null. It
// waits for that: OpenSSH's first process exits as soon as it has
// forked, before its child has called setsid and pointed them at
// /dev/null (cocoonbox-ssh's child does both before it says it is ready).
func checkDetached(t *testing.T, name string, pid int, fds ...int) {
	t.Helper()
	var problems []string
	deadline := time.Now().Add(time.Minute)
	for {
		problems = detachProblems(pid, fds)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range problems {
		t.Errorf("%s: background process %d: %s", name, pid, p)
	}
}

func detachProblems(pid int, fds []int) []string {
	var problems []string
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return []string{err.Error()}
	}
	// After "(comm)": state, ppid, pgrp, session.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 4 || fields[3] != strconv.Itoa(pid) {
		problems = append(problems, fmt.Sprintf("session %v, want its own", fields[3:4]))
	}
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(fd)); err != nil || target != "/dev/null" {
			problems = append(problems, fmt.Sprintf("descriptor %d is %q (%v), want /dev/null", fd, target, err))
		}
	}
	return problems
}
