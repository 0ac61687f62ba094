package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchMainVar makes this test binary the bench itself (TestMain), for
// TestOffloadInterrupted to start and interrupt.
const benchMainVar = "COCOONBOX_BENCH_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(benchMainVar) != "" {
		os.Args = append(os.Args[:1], strings.Fields(os.Getenv(benchMainVar))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOffloadInterrupted: -offload interrupted (SIGINT, as Ctrl-C) while
// its box CLI session runs in the local box stops the local box, with the
// session's tmux server, removes the work directory and exits 130. The
// bench runs on a tree of two files, built binaries, and a HOME, cache
// and TMPDIR of the test's.
func TestOffloadInterrupted(t *testing.T) {
	for _, tool := range []string{"git", "rsync", "tmux"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/deps.sh installs it): %v", tool, err)
		}
	}
	// The work directory is under root: short, for tmux's socket in it
	// (107 bytes at most).
	root := shortTemp(t)
	bin, tree, tmp := filepath.Join(root, "bin"), filepath.Join(root, "tree"), root
	for _, d := range []string{tree} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("go", "build", "-o", bin+"/", "../cmd/...").CombinedOutput(); err != nil {
		t.Fatalf("build the binaries: %v\n%s", err, out)
	}
	for name, data := range map[string]string{"a.txt": "a\n", "b/c.txt": "c\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(tree, name)), 0o755)
		if err := os.WriteFile(filepath.Join(tree, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top, _ := filepath.Abs("..")
	cmd := exec.Command(os.Args[0])
	cmd.Dir = top
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "XDG_CACHE_HOME="+filepath.Join(root, "cache"), "COCOONBOX_CLAIMS_DIR="+filepath.Join(root, "claims"),
		benchMainVar+"=-offload -rounds 1 -commits 1 -tree "+tree+" -bin "+bin)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		// Whatever this test fails on, it leaves no box running.
		for _, pid := range leftBehind(root) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	sc := bufio.NewScanner(stderr)
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.HasPrefix(sc.Text(), "offload (first)") {
			break
		}
	}
	work, _ := filepath.Glob(filepath.Join(tmp, "cocoonbox-bench*"))
	if len(work) != 1 || !slices.ContainsFunc(leftBehind(work[0]), isTmux) {
		t.Fatalf("no first offload with the box CLI session running in tmux (else this test shows nothing); work %q; the bench said:\n%s", work, strings.Join(seen, "\n"))
	}
	cmd.Process.Signal(syscall.SIGINT)
	for sc.Scan() {
		seen = append(seen, sc.Text())
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit status %d after SIGINT, want 130; the bench said:\n%s", code, strings.Join(seen, "\n"))
	}
	// localbox stop returns once the server has ended the rest and
	// removed its runtime file: the server itself may take a moment more.
	left := leftBehind(work[0])
	for deadline := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		left = leftBehind(work[0])
	}
	if len(left) > 0 {
		t.Errorf("processes of the bench's local box still run after SIGINT: %v", left)
		for _, pid := range left {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Logf("%d: %q %s", pid, b, st)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if _, err := os.Stat(work[0]); err == nil {
		t.Errorf("the work directory %s is left", work[0])
	}
}

// leftBehind lists the processes whose environment names a path under
// dir (the local box's HOME, a box command's or tmux's).
func leftBehind(dir string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "="+dir+"/") {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "/proc/"), "/environ"))
		if pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// isTmux reports whether pid runs tmux (the box CLI session's server).
func isTmux(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return filepath.Base(argv0) == "tmux"
}

// shortTemp is a new directory /tmp/cbbN, removed at the end: nearly as
// short as the bench's own /tmp, so that the sockets under it fit.
func shortTemp(t *testing.T) string {
	for n := os.Getpid() % 1000; ; n++ {
		dir := "/tmp/cbb" + strconv.Itoa(n)
		// 0711: served by root, the local box runs box commands as the box
		// user, which must reach its state directory and binaries here.
		if err := os.Mkdir(dir, 0o711); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		} else if !os.IsExist(err) {
			t.Fatal(err)
		}
	}
}
