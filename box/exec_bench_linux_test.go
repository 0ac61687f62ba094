package box_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
)

// resumeClient is client with resumable sessions, the box's half
// (cocoonbox-session and cocoonbox-agent) built from this tree and found
// on the box's PATH, as a local box started from bin/ finds it.
func resumeClient(tb testing.TB) *box.Client {
	tb.Helper()
	// COCOONBOX_BENCH_BIN names a directory with both built beforehand, so
	// that a profiler has their symbols and `perf stat` does not count the
	// build.
	dir := os.Getenv("COCOONBOX_BENCH_BIN")
	if dir == "" {
		dir = tb.TempDir()
		for _, name := range []string{"cocoonbox-session", "cocoonbox-agent"} {
			if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/cocoonbox/cocoonbox/cmd/"+name).CombinedOutput(); err != nil {
				tb.Fatalf("build %s: %v\n%s", name, err, out)
			}
		}
	}
	binDir = dir
	// The holder outlives the run by a minute: end it, so that its counts
	// reach a `perf stat` of the run.
	tb.Cleanup(func() {
		forHolders(func(pid int) {
			syscall.Kill(pid, syscall.SIGKILL)
		})
	})
	return clientIn(tb, false, dir, box.WithResume(box.Resume{}))
}

// binDir is the directory of the box half resumeClient built, whose
// holders cpuTime counts.
var binDir string

// cpuTime is the CPU this process, its reaped children and the live
// processes of binDir (the session holder) have used, for a
// benchmark's cpu-ms/op: on a loaded machine wall time says little.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	d := tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
	forHolders(func(pid int) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		ut, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		d += time.Duration(ut+st) * 10 * time.Millisecond
	})
	return d
}

// forHolders calls fn with the pid of each live process of binDir.
func forHolders(fn func(pid int)) {
	if binDir == "" {
		return
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(cmdline), binDir+"/") {
			fn(pid)
		}
	}
}

// BenchmarkSessionDownload is BenchmarkExecDownload through a resumable
// session: the box's agent and its holder are processes of their own.
func BenchmarkSessionDownload(b *testing.B) {
	c := resumeClient(b)
	b.SetBytes(streamSize)
	loop(b, func() {
		var out counter
		st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: fmt.Sprintf("head -c %d /dev/zero", streamSize), Stdout: &out})
		if err != nil || st.Code != 0 || out.n != streamSize {
			b.Fatal(st, err, out.n)
		}
	})
}

// BenchmarkSessionUpload is BenchmarkExecUpload through a resumable
// session.
func BenchmarkSessionUpload(b *testing.B) {
	c := resumeClient(b)
	b.SetBytes(streamSize)
	loop(b, func() {
		var out counter
		st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: "wc -c", Stdin: io.LimitReader(zeros{}, streamSize), Stdout: &out})
		if err != nil || st.Code != 0 {
			b.Fatal(st, err)
		}
	})
}

// BenchmarkSessionStartup is one `true` through a resumable session.
func BenchmarkSessionStartup(b *testing.B) {
	c := resumeClient(b)
	loop(b, func() {
		st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: "true"})
		if err != nil || st.Code != 0 {
			b.Fatal(st, err)
		}
	})
}
