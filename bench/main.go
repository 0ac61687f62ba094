// Bench measures cocoonbox's path against OpenSSH's on this machine:
// startup, 1 GiB down and up, git clone and no-op fetch, rsync first copy
// and no-op re-run, each run alternately through both paths for several
// rounds, with the plain loopback TCP copy as the ceiling. It prints a
// markdown table and, with -write, puts it into docs/benchmarks.md.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

var (
	rounds    = flag.Int("rounds", 5, "rounds; each runs every workload through both paths")
	size      = flag.Int64("size", 1<<30, "bytes for the download and upload workloads")
	calls     = flag.Int("calls", 20, "calls of `true` per round for the startup workload")
	only      = flag.String("only", "", "comma-separated workloads to run (default all but the resumable twins, such as \"resumable startup\", which run when named)")
	write     = flag.Bool("write", false, "write the table into docs/benchmarks.md")
	srcTree   = flag.String("tree", "/usr/local/go/src", "the source tree for the git and rsync workloads")
	commits   = flag.Int("commits", 300, "commits in the generated git repository")
	keepWork  = flag.Bool("keep", false, "keep the work directory")
	rtts      = flag.String("rtt", "", "comma-separated round trips in ms (e.g. 0,10,50,100): run the latency table instead, ours over TLS and ssh through a delay proxy; with -offload, the offload table at each round trip; with -sessions, its resume and download rows at each round trip")
	rttSize   = flag.Int64("rtt-size", 256<<20, "bytes for the download and upload workloads at a round trip above 0 in the latency table (-size at 0)")
	binDir    = flag.String("bin", "", "the directory of the binaries to measure (default bin/ of this tree, which bench/run builds)")
	verbose   = flag.Bool("v", false, "print each offload's own step times (with -offload)")
	sessionsT = flag.Bool("sessions", false, "run the resumable sessions table instead: time to resume after an outage and a freeze, a download across a cut every 10 s, memory per detached session (ours alone: ssh's session ends at each fault)")
	engine    = flag.String("engine", "", "the local box's engine (localbox start --engine): docker or podman runs the box in a container and writes the table between the bench-ENGINE markers")
	offloadT  = flag.Bool("offload", false, "run the offload table instead: first and second offload and back of the tree's repository with the stand-in CLI (-rounds rounds, then one untimed round that counts processes)")
)

func main() {
	flag.Parse()
	do := run
	if *delayTo != "" {
		do = serveDelay
	}
	err := do()
	if stopping() {
		select {} // the signal's handler exits
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// env is one run's machinery: the work directory, sshd and the local box.
type env struct {
	work   string
	bin    string
	sshCfg string
	boxEnv []string
	// stdioCfg is the ssh_config for OpenSSH's ssh through
	// cocoonbox-ssh --stdio.
	stdioCfg string
	// latency is set while the latency table runs: ssh's path goes
	// through a delay proxy to the listening sshd.
	latency bool
	// boxGit is the box's copy of the git rows' directory (gitWork.toBox),
	// an absolute path, once made.
	boxGit string
	// resume, when set, is COCOONBOX_RESUME for our commands (the
	// resumable twins of the rows, e.resumable).
	resume string
	// sshdPid is the listening sshd's process id.
	sshdPid int
}

// spent is the CPU time (user and system) of the commands timed ran,
// with the descendants they waited for, since measure last reset it.
var spent time.Duration

// serverCPU is the CPU time so far of the server of our path (true: the
// local box with its commands) or of ssh's (the listening sshd with the
// connections it reaped); set by run.
var serverCPU = func(ours bool) time.Duration { return 0 }

// a workload runs once through one path and returns its wall time and the
// client's peak RSS in KiB (0 when not measured).
type workload struct {
	name  string
	ours  func() (time.Duration, int64, error)
	ssh   func() (time.Duration, int64, error)
	limit func() (time.Duration, error)
	// base, if not nil, is a third path run in each round: the row also
	// reports ours/base, under the table.
	base     func() (time.Duration, int64, error)
	baseName string
	setup    func() error
	// requests, if not nil, is how many requests one run makes, one
	// after another: the latency table counts round trips per request.
	requests func() int
	bytes    int64
	note     string
}

func run() error {
	top, err := os.Getwd()
	if err != nil {
		return err
	}
	e := &env{bin: filepath.Join(top, "bin")}
	if *binDir != "" {
		e.bin = *binDir
	}
	e.work, err = os.MkdirTemp("", "cocoonbox-bench")
	if err != nil {
		return err
	}
	// Served by root, the local box runs box commands as the box user,
	// which must reach its state directory here.
	if os.Geteuid() == 0 {
		if err := os.Chmod(e.work, 0o711); err != nil {
			return err
		}
	}
	undoOnSignal()
	serverCPU = func(ours bool) time.Duration {
		if ours {
			return e.boxCPU()
		}
		return e.sshdCPU()
	}
	if !*keepWork {
		defer atExit(func() { os.RemoveAll(e.work) })()
	}
	if *offloadT {
		return e.runOffload(top)
	}
	stopSSHD, err := e.startSSHD()
	if err != nil {
		return fmt.Errorf("sshd: %w", err)
	}
	defer stopSSHD()
	if *sessionsT {
		return e.runSessions(top)
	}
	if *rtts != "" {
		return e.runLatency(top)
	}
	stopBox, err := e.startBox()
	if err != nil {
		return fmt.Errorf("local box: %w", err)
	}
	defer stopBox()
	if err := e.writeStdioConfig(); err != nil {
		return fmt.Errorf("ssh --stdio: %w", err)
	}

	var results []result
	for _, w := range e.workloads() {
		if !selected(w.name) {
			continue
		}
		if w.setup != nil {
			if err := w.setup(); err != nil {
				return fmt.Errorf("%s: setup: %w", w.name, err)
			}
		}
		r, err := measure(w)
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		fmt.Fprintf(os.Stderr, "%-14s ours %8s  ssh %8s  ratio %.2f  CPU ours %s ssh %s ratio %.2f\n", w.name, r.ours.Round(time.Millisecond), r.ssh.Round(time.Millisecond), r.ratio,
			r.oursCPU.Round(10*time.Millisecond), r.sshCPU.Round(10*time.Millisecond), r.cpuRatio)
		results = append(results, r)
	}
	marker, where := "bench", ""
	if *engine != "" && *engine != "process" {
		marker, where = "bench-"+*engine, fmt.Sprintf("; the box a %s container of %s", *engine, boxImage(e))
	}
	return publish(top, marker, fmt.Sprintf("; %d rounds, %d MiB transfers%s; %s; %s",
		*rounds, *size>>20, where, version("ssh", "-V"), version("rsync", "--version")), render(results))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// result is one workload's medians over the rounds.
type result struct {
	workload
	ours, ssh time.Duration
	ratio     float64 // median of the per-round ratios ours/ssh
	// oursCPU and sshCPU are the medians of each path's CPU time: its
	// client's processes and its server's (the local box with the box's
	// commands; sshd with its sessions); cpuRatio the median of the
	// per-round ratios, 0 when not known.
	oursCPU, sshCPU time.Duration
	cpuRatio        float64
	baseRatio       float64 // median of the per-round ratios ours/base
	rss             int64   // peak RSS of our client, KiB
	nreq            int     // w.requests() when measured
	limit           time.Duration
}

// selected reports whether -only selects the workload named name: every
// row when -only is empty, but the resumable twins (e.resumable) only
// when named.
func selected(name string) bool {
	if *only == "" {
		return !strings.HasPrefix(name, "resumable ")
	}
	return contains(strings.Split(*only, ","), name)
}

// withCPU runs f, one path of a workload, and returns its CPU time too:
// what spent gained, and what its server used meanwhile.
func withCPU(f func() (time.Duration, int64, error), ours bool) (time.Duration, int64, time.Duration, error) {
	spent = 0
	s0 := serverCPU(ours)
	d, m, err := f()
	return d, m, spent + serverCPU(ours) - s0, err
}

func measure(w workload) (result, error) {
	var ours, sshs, oursCPU, sshCPU []time.Duration
	var ratios, cpuRatios []float64
	var limits []time.Duration
	var baseRatios []float64
	r := result{workload: w}
	if w.requests != nil {
		r.nreq = w.requests()
	}
	for i := 0; i < *rounds; i++ {
		// Alternate which path goes first, so warm caches favour neither.
		first, second, firstOurs := w.ours, w.ssh, true
		if i%2 == 1 {
			first, second, firstOurs = w.ssh, w.ours, false
		}
		d1, m1, c1, err := withCPU(first, firstOurs)
		if err != nil {
			return r, err
		}
		d2, m2, c2, err := withCPU(second, !firstOurs)
		if err != nil {
			return r, err
		}
		o, s, m, oc, sc := d1, d2, m1, c1, c2
		if i%2 == 1 {
			o, s, m, oc, sc = d2, d1, m2, c2, c1
		}
		ours, sshs = append(ours, o), append(sshs, s)
		ratios = append(ratios, float64(o)/float64(s))
		oursCPU, sshCPU = append(oursCPU, oc), append(sshCPU, sc)
		if sc > 0 {
			cpuRatios = append(cpuRatios, float64(oc)/float64(sc))
		}
		r.rss = max(r.rss, m)
		if w.base != nil {
			d, _, err := w.base()
			if err != nil {
				return r, err
			}
			baseRatios = append(baseRatios, float64(o)/float64(d))
		}
		if w.limit != nil {
			d, err := w.limit()
			if err != nil {
				return r, err
			}
			limits = append(limits, d)
		}
	}
	r.ours, r.ssh, r.ratio = median(ours), median(sshs), medianF(ratios)
	r.oursCPU, r.sshCPU = median(oursCPU), median(sshCPU)
	if len(cpuRatios) > 0 {
		r.cpuRatio = medianF(cpuRatios)
	}
	if len(limits) > 0 {
		r.limit = median(limits)
	}
	if len(baseRatios) > 0 {
		r.baseRatio = medianF(baseRatios)
	}
	return r, nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func medianF(f []float64) float64 {
	s := append([]float64(nil), f...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func render(rs []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| workload | ours | ssh | ours/ssh (median of rounds) | CPU ours/ssh (ours, ssh) | our client's peak RSS | of loopback TCP limit (ours, ssh) |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		rss := ""
		if r.rss > 0 {
			rss = fmt.Sprintf("%.1f MiB", float64(r.rss)/1024)
		}
		lim := ""
		if r.limit > 0 {
			lim = fmt.Sprintf("%.0f%%, %.0f%% (limit %s)", 100*float64(r.limit)/float64(r.ours), 100*float64(r.limit)/float64(r.ssh), rate(r.bytes, r.limit))
		}
		ours, ssh := r.ours.Round(time.Millisecond).String(), r.ssh.Round(time.Millisecond).String()
		if r.bytes > 0 {
			ours += " (" + rate(r.bytes, r.ours) + ")"
			ssh += " (" + rate(r.bytes, r.ssh) + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %s | %s | %s |\n", r.name, ours, ssh, r.ratio, cpuCell(r), rss, lim)
	}
	for i, r := range rs {
		if r.base == nil {
			continue
		}
		if i == 0 || rs[i-1].base == nil {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "- %s against %s: %.2f (median of the per-round ratios)\n", r.name, r.baseName, r.baseRatio)
	}
	return b.String()
}

// cpuCell is a row's CPU column: the median of the per-round ratios of
// the paths' CPU time (client and server), then each path's median.
func cpuCell(r result) string {
	if r.cpuRatio == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f (%s, %s)", r.cpuRatio, r.oursCPU.Round(10*time.Millisecond), r.sshCPU.Round(10*time.Millisecond))
}

func rate(n int64, d time.Duration) string {
	return fmt.Sprintf("%.0f MB/s", float64(n)/d.Seconds()/1e6)
}

// publish prints table and, with -write, puts it into top's
// docs/benchmarks.md between the markers <!-- name:begin --> and
// <!-- name:end -->, under a line that says when and on what it ran, then
// about.
func publish(top, name, about, table string) error {
	fmt.Print(table)
	if !*write {
		return nil
	}
	path := filepath.Join(top, "docs", "benchmarks.md")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc, begin, end := string(b), "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s markers", path, begin, end)
	}
	// The load average at the end: on a machine shared with other work it
	// says how far to trust the walls (the ratios, of the same rounds,
	// move less).
	header := fmt.Sprintf("Run %s on %s, load average %s%s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine(), loadAvg(), about)
	return os.WriteFile(path, []byte(doc[:i+len(begin)]+"\n"+header+table+doc[j:]), 0o644)
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	n := strings.Count(mustRead("/proc/cpuinfo"), "processor\t:")
	return fmt.Sprintf("%d × %s", n, cpu)
}

func mustRead(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func version(cmd string, arg string) string {
	out, _ := exec.Command(cmd, arg).CombinedOutput()
	l, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(l)
}

// timed runs c and returns its wall time and peak RSS in KiB.
func timed(c *exec.Cmd) (time.Duration, int64, error) {
	var stderr bytes.Buffer
	if c.Stderr == nil {
		c.Stderr = &stderr
	}
	t0 := time.Now()
	err := c.Run()
	d := time.Since(t0)
	if c.ProcessState != nil {
		spent += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	}
	if err != nil {
		return d, 0, fmt.Errorf("%s: %w: %s", strings.Join(c.Args, " "), err, stderr.String())
	}
	return d, proc.PeakRSS(c.ProcessState), nil
}

// loopbackCopy moves n bytes over a loopback TCP connection: the ceiling.
func loopbackCopy(n int64) (time.Duration, error) { return tcpCopy(n, 0) }

// tcpCopy times a copy of n bytes over loopback TCP into a reader that
// discards them; with rtt above 0, through a delay proxy of that round
// trip (startDelay), which measures what the proxy itself carries.
func tcpCopy(n int64, rtt time.Duration) (time.Duration, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer lis.Close()
	addr := lis.Addr().String()
	if rtt > 0 {
		p, err := startDelay(addr, rtt)
		if err != nil {
			return 0, err
		}
		defer p.Close()
		addr = fmt.Sprintf("127.0.0.1:%d", p.Port())
	}
	done := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		done <- err
	}()
	t0 := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	for left := n; left > 0; {
		k := min(left, int64(len(buf)))
		if _, err := c.Write(buf[:k]); err != nil {
			return 0, err
		}
		left -= k
	}
	c.Close()
	if err := <-done; err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return time.Since(t0), nil
}
