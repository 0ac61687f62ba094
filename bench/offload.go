package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The offload table (-offload): one repository of the bench's tree (the
// Go source tree, 11,478 files) cloned with one pack, offloaded into box
// main of the local box with the stand-in CLI, brought back, offloaded a
// second time and brought back again; each round on a fresh clone, so
// every first offload finds no copy in the box. CI never runs it: only
// -offload selects it.

// offloadHandover is the hand-over the stand-in works from: one commit.
const offloadHandover = `# Hand-over: bench
## Goal and definition of done
box.txt exists
## User preferences and constraints
none
## Current state
none
## Decisions made
none
## Files touched
none
## Next steps
standin: append box.txt made in the box
## Commands
none
## Environment facts
none
## Gotchas learned
none
## Open questions
none
`

// offloadRows are the steps of one round, in order.
var offloadRows = []string{"offload (first)", "back", "offload (second)", "back (second)"}

func (e *env) runOffload(top string) error {
	if *rtts != "" {
		return e.runOffloadRTT(top)
	}
	stopBox, err := e.startBox()
	if err != nil {
		return fmt.Errorf("local box: %w", err)
	}
	defer stopBox()
	g, err := e.prepareOffload(top)
	if err != nil {
		return err
	}
	times, err := e.offloadRounds(g, "", *rounds, true)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| step | median of %d | min | max | processes here | git processes in the box |\n| --- | --- | --- | --- | --- | --- |\n", *rounds)
	for _, row := range offloadRows {
		ds := times[row]
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		here, box, _ := strings.Cut(counts[row], " / ")
		if len(s) == 0 {
			fmt.Fprintf(&b, "| %s | | | | %s | %s |\n", row, here, box)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", row, median(ds).Round(time.Millisecond), s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), here, box)
	}
	return publish(top, "bench-offload", fmt.Sprintf("; %d rounds; %s",
		*rounds, version("rsync", "--version")), b.String())
}

// prepareOffload puts the stand-in CLI, signed in, and a git identity in
// box main's home, and returns the bench's repository.
func (e *env) prepareOffload(top string) (*gitWork, error) {
	g, err := e.cachedRepo()
	if err != nil {
		return nil, err
	}
	boxHome := e.boxHome()
	for _, d := range []string{".local/bin", ".standin"} {
		if err := os.MkdirAll(filepath.Join(boxHome, d), 0o755); err != nil {
			return nil, err
		}
	}
	standin, err := os.ReadFile(filepath.Join(top, "cli", "testdata", "standin", "standin-cli"))
	if err != nil {
		return nil, err
	}
	for name, data := range map[string]string{
		".local/bin/claude":         string(standin),
		".profile":                  "if [ -d \"$HOME/.local/bin\" ]; then PATH=\"$HOME/.local/bin:$PATH\"; fi\n",
		".gitconfig":                "[user]\n\tname = Box User\n\temail = box-user@example.com\n",
		".standin/signed-in-claude": "box-user@example.com\n",
	} {
		if err := os.WriteFile(filepath.Join(boxHome, name), []byte(data), 0o755); err != nil {
			return nil, err
		}
	}
	// The box user, not root, owns its home: what the bench put there is
	// its too, as if it had installed the stand-in itself.
	return g, chownLike(boxHome, ".local", ".standin", ".profile", ".gitconfig")
}

// chownLike gives the names under dir, with what is in them, to dir's
// owner (GNU chown's --reference).
func chownLike(dir string, names ...string) error {
	args := []string{"-R", "--reference=" + dir}
	for _, n := range names {
		args = append(args, filepath.Join(dir, n))
	}
	if out, err := exec.Command("chown", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("chown: %v: %s", err, out)
	}
	return nil
}

// offloadRounds runs n timed rounds of offloadRows, each on a fresh clone
// of g named by tag and its number, and with count one more, untimed,
// that counts processes (into counts). It returns each row's times.
func (e *env) offloadRounds(g *gitWork, tag string, n int, count bool) (map[string][]time.Duration, error) {
	times := map[string][]time.Duration{}
	last := n - 1
	if count {
		last = n
	}
	for i := 0; i <= last; i++ {
		if err := e.offloadRound(g, tag, i, count && i == n, times); err != nil {
			return nil, err
		}
	}
	return times, nil
}

// offloadRound runs round i of offloadRows on a fresh clone of g named by
// tag and i, adding each row's time to times, or with counting the
// processes of each (into counts).
func (e *env) offloadRound(g *gitWork, tag string, i int, counting bool, times map[string][]time.Duration) error {
	repo := filepath.Join(e.work, "offload", fmt.Sprintf("repo-%s%d", tag, i))
	if err := runIn(e.work, "git", "clone", "-q", g.packed(), repo); err != nil {
		return err
	}
	// A clone writes its files and index in the same second, so git
	// takes every entry as racily clean and hashes it again; a
	// repository in use has had a git status since.
	time.Sleep(1100 * time.Millisecond)
	if err := runIn(repo, "git", "status", "-s"); err != nil {
		return err
	}
	for _, row := range offloadRows {
		var d time.Duration
		var err error
		if strings.HasPrefix(row, "back") {
			if err := e.waitIdle(repo); err != nil {
				return fmt.Errorf("round %d, %s: %w", i+1, row, err)
			}
		}
		if counting {
			var c string
			c, err = e.countProcs(repo, row)
			fmt.Fprintf(os.Stderr, "%-18s processes: %s\n", row, c)
			counts[row] = c
		} else {
			d, err = e.offloadStep(repo, row)
			fmt.Fprintf(os.Stderr, "%s%-18s %s\n", tag, row, d.Round(time.Millisecond))
			times[row] = append(times[row], d)
		}
		if err != nil {
			return fmt.Errorf("round %d, %s: %w", i+1, row, err)
		}
	}
	return nil
}

// runOffloadRTT is the offload table at round trips (-offload -rtt): the
// local box over TLS behind a delay proxy of each round trip, -rounds
// timed rounds at each, and the round trips each step spends beyond its
// time at 0 ms (renderOffloadRTT). Each round runs at
// every round trip in turn (the order reversed every other round), so
// that a load that comes and goes on the machine weighs on all of them
// alike, not on the one that ran then. Before each, a boxes list through
// that round trip's control master keeps its connection as the steps
// before it would (a master whose connection was silent for 10 s checks
// it first, a round trip more: docs/architecture.md).
func (e *env) runOffloadRTT(top string) error {
	ms, tb, err := e.rttBox()
	if err != nil {
		return err
	}
	defer tb.stop()
	g, err := e.prepareOffload(top)
	if err != nil {
		return err
	}
	base := e.boxEnv
	defer func() { e.boxEnv = base }()
	proxies := map[int]*delayChild{}
	times := map[int]map[string][]time.Duration{}
	for _, rtt := range ms {
		pb, err := startDelay(fmt.Sprintf("127.0.0.1:%d", tb.port), time.Duration(rtt)*time.Millisecond)
		if err != nil {
			return err
		}
		defer pb.Close()
		proxies[rtt], times[rtt] = pb, map[string][]time.Duration{}
	}
	for i := 0; i < *rounds; i++ {
		order := slices.Clone(ms)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, rtt := range order {
			e.boxEnv = tb.through(base, proxies[rtt].Port())
			if out, err := e.ours("cocoonbox", "boxes", "list").CombinedOutput(); err != nil {
				return fmt.Errorf("%d ms: boxes list: %v: %s", rtt, err, out)
			}
			if err := e.offloadRound(g, fmt.Sprintf("%dms-", rtt), i, false, times[rtt]); err != nil {
				return fmt.Errorf("%d ms: %w", rtt, err)
			}
		}
	}
	return publish(top, "bench-offload-rtt", fmt.Sprintf("; medians of %d rounds, each round at every round trip in turn; the local box over TLS behind the delay proxy; %s",
		*rounds, version("rsync", "--version")), renderOffloadRTT(ms, times))
}

// renderOffloadRTT makes the offload table at round trips from each
// round trip's times of each step, round by round: a column of medians
// per round trip, then the round trips each step spent beyond 0 ms at
// each other round trip, when 0 ms was measured: the median over the
// rounds of (time - time at 0 ms in the same round) / RTT, so that a
// load that came and went weighs on a round's times alike.
func renderOffloadRTT(ms []int, times map[int]map[string][]time.Duration) string {
	var b strings.Builder
	b.WriteString("| step |")
	for _, rtt := range ms {
		fmt.Fprintf(&b, " %d ms |", rtt)
	}
	_, haveZero := times[0]
	var beyond []int
	for _, rtt := range ms {
		if rtt > 0 && haveZero {
			beyond = append(beyond, rtt)
			fmt.Fprintf(&b, " round trips beyond 0 ms, at %d ms |", rtt)
		}
	}
	b.WriteString("\n|" + strings.Repeat(" --- |", 1+len(ms)+len(beyond)) + "\n")
	for _, row := range offloadRows {
		fmt.Fprintf(&b, "| %s |", row)
		for _, rtt := range ms {
			fmt.Fprintf(&b, " %s |", median(times[rtt][row]).Round(time.Millisecond))
		}
		for _, rtt := range beyond {
			ds, zero := times[rtt][row], times[0][row]
			var rts []float64
			for i := range min(len(ds), len(zero)) {
				rts = append(rts, float64(ds[i]-zero[i])/float64(time.Duration(rtt)*time.Millisecond))
			}
			if len(rts) > 0 {
				fmt.Fprintf(&b, " %.1f |", medianF(rts))
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

var counts = map[string]string{}

func loadAvg() string {
	f := strings.Fields(mustRead("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// waitIdle waits, 30 s at most, until the box CLI session of repo is
// idle: back is timed from the box CLI's work done, as a user brings
// finished work home. A back that began while the stand-in still made
// its first commit had BACK queued and timed the rest of that turn too.
func (e *env) waitIdle(repo string) error {
	idle := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(filepath.Base(repo)) + `\s+\S+\s+idle\s`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := e.ours("cocoonbox", "offload", "status")
		c.Dir = repo
		out, err := c.Output()
		if err == nil && idle.Match(out) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the box CLI session is not idle after 30 s: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// offloadCmd is the command of one step in repo.
func (e *env) offloadCmd(repo, row string) (*exec.Cmd, error) {
	var c *exec.Cmd
	if strings.HasPrefix(row, "back") {
		c = e.ours("cocoonbox", "back")
		if *verbose {
			c.Args = append(c.Args, "-v")
		}
	} else {
		hp := e.ours("cocoonbox", "offload", "handover-path")
		hp.Dir = repo
		out, err := hp.Output()
		if err != nil {
			return nil, fmt.Errorf("handover-path: %w", err)
		}
		if err := os.WriteFile(strings.TrimSpace(string(out)), []byte(offloadHandover), 0o600); err != nil {
			return nil, err
		}
		c = e.ours("cocoonbox", "offload", "--kind", "claude", "--yes")
		if *verbose {
			c.Args = append(c.Args, "-v")
		}
	}
	c.Dir = repo
	return c, nil
}

func (e *env) offloadStep(repo, row string) (time.Duration, error) {
	c, err := e.offloadCmd(repo, row)
	if err != nil {
		return 0, err
	}
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	box0 := e.boxCPU()
	d, _, err := timed(c)
	if err != nil {
		err = fmt.Errorf("%w: %s", err, errb.String())
	}
	if m := regexp.MustCompile(`in [0-9.]+ s total: .*`).FindString(out.String()); m != "" && *verbose {
		fmt.Fprintf(os.Stderr, "  %s\n", m)
	}
	if *verbose {
		// The command's own timeline (-v): its steps and its calls to
		// the box, from its start.
		for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
			if strings.HasPrefix(l, "cocoonbox: +") {
				fmt.Fprintf(os.Stderr, "    %s\n", strings.TrimPrefix(l, "cocoonbox: "))
			}
		}
	}
	if *verbose && err == nil {
		// CPU time moves less with the machine's load than wall time:
		// what a step's own work costs, here (the command and what it
		// waited for) and in the box (the local box and its commands).
		ps := c.ProcessState
		fmt.Fprintf(os.Stderr, "  CPU: here %.2f s, box %.2f s\n", (ps.UserTime() + ps.SystemTime()).Seconds(), (e.boxCPU() - box0).Seconds())
	}
	return d, err
}

// cachedRepo builds the bench's repository once per machine, under the
// user's cache directory, keyed by the tree and the number of commits.
func (e *env) cachedRepo() (*gitWork, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "cocoonbox-bench", fmt.Sprintf("%s-%d", strings.ReplaceAll(strings.Trim(*srcTree, "/"), "/", "_"), *commits))
	g := &gitWork{e: e, dir: dir}
	if _, err := os.Stat(g.packed()); err == nil {
		return g, nil
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := g.build(); err != nil {
		return nil, err
	}
	if err := runIn(dir, "git", "clone", "-q", "--bare", "--no-local", g.bare(), g.packed()+".tmp"); err != nil {
		return nil, err
	}
	if err := os.Rename(g.packed()+".tmp", g.packed()); err != nil {
		return nil, err
	}
	return g, os.RemoveAll(filepath.Join(dir, "build"))
}

// packed is the bare repository with all its objects in one pack, which
// each round clones (locally: its pack is linked, not rewritten).
func (g *gitWork) packed() string { return filepath.Join(g.dir, "packed.git") }

// countProcs runs one step with every process here counted (strace -f
// of the command) and every git process in the box counted (git's trace2
// event target, a directory, set in the box user's ~/.gitconfig: one file
// per process), and returns "N (git G) / H": the processes here that ran
// a program, of them the gits, and the box's gits. The box's count
// includes the stand-in CLI's own git (its commit and log).
func (e *env) countProcs(repo, row string) (string, error) {
	dir, err := os.MkdirTemp(e.work, "count-*")
	if err != nil {
		return "", err
	}
	// The box's gits run as the box user (a local box served by root runs
	// them as `user`): it searches dir and writes in boxTrace, whatever
	// the umask made of their modes.
	boxTrace := filepath.Join(dir, "box")
	if err := os.Mkdir(boxTrace, 0o777); err != nil {
		return "", err
	}
	if err := errors.Join(os.Chmod(dir, 0o711), os.Chmod(boxTrace, 0o777)); err != nil {
		return "", err
	}
	gc := filepath.Join(e.boxHome(), ".gitconfig")
	orig, err := os.ReadFile(gc)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(gc, append(append([]byte{}, orig...), "[trace2]\n\teventTarget = "+boxTrace+"\n"...), 0o644); err != nil {
		return "", err
	}
	defer os.WriteFile(gc, orig, 0o644)
	c, err := e.offloadCmd(repo, row)
	if err != nil {
		return "", err
	}
	here := filepath.Join(dir, "here")
	c.Args = append([]string{"strace", "-f", "-q", "-ttt", "-s", "128", "-e", "trace=execve", "-o", here, c.Path}, c.Args[1:]...)
	c.Path, _ = exec.LookPath("strace")
	var boxStrace *exec.Cmd
	boxLog := filepath.Join(dir, "box.strace")
	if pid := e.boxPid(); *verbose && pid != "" {
		// Every process the local box starts for the step, ours and
		// the box CLI's included.
		boxStrace = exec.Command("strace", "-f", "-q", "-ttt", "-s", "128", "-e", "trace=execve", "-o", boxLog, "-p", pid)
		if err := boxStrace.Start(); err != nil {
			return "", err
		}
		// strace -p is attached once it has written the first line of
		// its log, or after a second.
		for range 100 {
			if fi, err := os.Stat(boxLog); err == nil && fi.Size() > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	start := time.Now()
	_, _, err = timed(c)
	if boxStrace != nil {
		boxStrace.Process.Signal(os.Interrupt)
		boxStrace.Wait()
	}
	if err != nil {
		return "", err
	}
	files, _ := os.ReadDir(boxTrace)
	if len(files) == 0 {
		// Every step runs gits in the box; none counted is a trace that
		// could not be written, not a count.
		return "", fmt.Errorf("%s: no git in the box wrote its trace2 events to %s", row, boxTrace)
	}
	if *verbose {
		// Under strace every process start costs more: the spans show
		// what ran when and for how long, not the step's time.
		fmt.Fprintf(os.Stderr, "  %s, here (strace -f):\n", row)
		for _, s := range execSpans(here, start) {
			fmt.Fprintf(os.Stderr, "    %s\n", s)
		}
		if boxStrace != nil {
			fmt.Fprintf(os.Stderr, "  %s, the local box's processes (strace -f -p):\n", row)
			for _, s := range execSpans(boxLog, start) {
				fmt.Fprintf(os.Stderr, "    %s\n", s)
			}
		}
		fmt.Fprintf(os.Stderr, "  %s, the box's gits (trace2):\n", row)
		for _, s := range trace2Spans(boxTrace, start) {
			fmt.Fprintf(os.Stderr, "    %s\n", s)
		}
	}
	return countExecs(here) + fmt.Sprintf(" / %d", len(files)), nil
}

// span is one process of a step: when it started after the step, how
// long it ran, and its command line.
type span struct {
	at, d time.Duration
	argv  string
}

func (s span) String() string {
	return fmt.Sprintf("+%6.1f ms %6.1f ms  %s", float64(s.at)/1e6, float64(s.d)/1e6, s.argv)
}

var (
	spanExecRE = regexp.MustCompile(`^(\d+)\s+(\d+\.\d+) execve\("[^"]*", \[(.*)\](?:, \S+ /\* \d+ vars \*/)?\) = 0$`)
	spanExitRE = regexp.MustCompile(`^(\d+)\s+(\d+\.\d+) \+\+\+ (?:exited|killed)`)
)

// execSpans reads an strace -f -ttt -e trace=execve log: each process's
// last program, from its execve to its exit, in the order they started.
func execSpans(path string, start time.Time) []span {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	byPid := map[string]*span{}
	var all []*span
	stamp := func(s string) time.Duration {
		v, _ := strconv.ParseFloat(s, 64)
		return time.Unix(0, int64(v*1e9)).Sub(start)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := spanExecRE.FindStringSubmatch(sc.Text()); m != nil {
			argv := strings.ReplaceAll(m[3], `", "`, " ")
			if len(argv) > 160 {
				argv = argv[:160] + "..."
			}
			s := &span{at: stamp(m[2]), argv: strings.Trim(argv, `"`)}
			byPid[m[1]] = s
			all = append(all, s)
		} else if m := spanExitRE.FindStringSubmatch(sc.Text()); m != nil {
			if s := byPid[m[1]]; s != nil {
				s.d = stamp(m[2]) - s.at
			}
		}
	}
	out := make([]span, len(all))
	for i, s := range all {
		out[i] = *s
	}
	return out
}

// trace2Spans reads a directory of git trace2 event files (one per
// process): each git's start, its own elapsed time and argv, in the
// order they started.
func trace2Spans(dir string, start time.Time) []span {
	files, _ := os.ReadDir(dir)
	var out []span
	for _, fe := range files {
		b, err := os.ReadFile(filepath.Join(dir, fe.Name()))
		if err != nil {
			continue
		}
		var s span
		for _, l := range strings.Split(string(b), "\n") {
			var ev struct {
				Event string   `json:"event"`
				Time  string   `json:"time"`
				Argv  []string `json:"argv"`
				TAbs  float64  `json:"t_abs"`
			}
			if json.Unmarshal([]byte(l), &ev) != nil {
				continue
			}
			switch ev.Event {
			case "start":
				if t, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
					s.at = t.Sub(start)
				}
				s.argv = strings.Join(ev.Argv, " ")
			case "exit", "atexit":
				s.d = time.Duration(ev.TAbs * 1e9)
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

var execRE = regexp.MustCompile(`^(\d+)\s+(?:\d+\.\d+ )?execve\("([^"]*)".*= 0$`)

// countExecs counts the pids of an strace log that ran a program, and of
// them those that ran git.
func countExecs(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "?"
	}
	defer f.Close()
	procs, gits := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := execRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		procs[m[1]] = true
		if b := filepath.Base(m[2]); b == "git" || strings.HasPrefix(b, "git-") {
			gits[m[1]] = true
		}
	}
	return fmt.Sprintf("%d (git %d)", len(procs), len(gits))
}

// boxHome is box main's home in the bench's local box.
func (e *env) boxHome() string {
	return filepath.Join(e.work, "home", ".local", "state", "cocoonbox", "localbox", "boxes", "main", "home")
}
