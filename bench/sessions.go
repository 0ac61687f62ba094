package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/faultproxy"
)

// runSessions runs the resumable sessions table (docs/benchmarks.md
// "Resumable sessions"): our client through internal/faultproxy in front
// of the local box over TLS, with COCOONBOX_RESUME=on. ssh has no row:
// its session ends at each of these faults.
func (e *env) runSessions(top string) error {
	tb, err := e.startTLSBox()
	if err != nil {
		return err
	}
	defer tb.stop()
	p, err := faultproxy.Listen("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", tb.port))
	if err != nil {
		return err
	}
	defer p.Close()
	_, ps, _ := net.SplitHostPort(p.Addr())
	port, _ := strconv.Atoi(ps)
	// Keepalive of 10 s + 1 s (the least gRPC allows), so that a freeze
	// is noticed in 11 s, not the default 45. No connection sharing: a
	// master started early would carry later calls on a link opened
	// before the proxy's delay was set (and, under load, only when its
	// measured round trip passes 2 ms), so each client dials itself.
	e.boxEnv = append(tb.through(e.boxEnv, port), "COCOONBOX_RESUME=on", "COCOONBOX_KEEPALIVE=10s,1s", "COCOONBOX_CONTROL_PERSIST=no")
	if out, err := e.ours("cocoonbox-ssh", "main", "true").CombinedOutput(); err != nil {
		return fmt.Errorf("first call: %v: %s", err, out)
	}
	ms := []int{0}
	if *rtts != "" {
		if ms, err = parseRTTs(); err != nil {
			return err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| row | result (median of %d) | note |\n| --- | --- | --- |\n", *rounds)
	// Memory first, while the holder has held nothing else.
	if err := e.detachedMemory(&b); err != nil {
		return err
	}
	for _, rtt := range ms {
		if err := e.sessionRows(&b, p, time.Duration(rtt)*time.Millisecond, len(ms) > 1 || rtt > 0); err != nil {
			return err
		}
	}
	about := fmt.Sprintf("; %d rounds; our client through internal/faultproxy to the local box over TLS on loopback", *rounds)
	if len(ms) > 1 || ms[0] > 0 {
		about += fmt.Sprintf(", the proxy adding round trips of %s ms", *rtts)
	}
	return publish(top, "bench-sessions", about, b.String())
}

// sessionRows writes the rows of resume times and of a download across
// cuts through p with round trip rtt added (named "at N ms" when named
// is set): the dial (a TLS handshake through p), the time to resume
// after an outage and after a freeze, a download with no cut and with a
// cut every 10 s.
func (e *env) sessionRows(b *strings.Builder, p *faultproxy.Proxy, rtt time.Duration, named bool) error {
	p.Delay(rtt)
	at := ""
	if named {
		at = fmt.Sprintf(" at %d ms", rtt.Milliseconds())
	}
	var dials []time.Duration
	for i := 0; i < 5; i++ {
		d, err := tlsDial(p.Addr())
		if err != nil {
			return err
		}
		dials = append(dials, d)
	}
	dial := median(dials)
	goal := 2*rtt + dial
	fmt.Fprintf(b, "| dial%s | %s | a TCP connection and TLS handshake through the proxy, median of 5; the goal for a resume is 2 round trips and the dial: %s |\n", at, dial.Round(time.Millisecond), goal.Round(time.Millisecond))
	plain, err := e.plainEcho(5)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "| a plain Exec%s | %s | a new `cocoonbox-ssh main echo line` with `COCOONBOX_RESUME=off` through the same proxy, from its start to the line, median of 5: a process start, the dial, the Exec and its answer, the reference for a resume |\n", at, plain.Round(time.Millisecond))

	for _, f := range []struct {
		name string
		d    time.Duration
		do   func(time.Duration)
		note string
	}{
		{"resume after an outage of 3 s", 3 * time.Second, p.Outage, "every link reset, new ones refused for 3 s (a network change); from the link's return to the first echo after it"},
		{"resume after a freeze of 15 s", 15 * time.Second, p.Freeze, "no byte either way for 15 s (a sleep); keepalive gives up after 11 s and the new dial waits for the thaw; from the thaw to the first echo after it"},
	} {
		var ds, cpus []time.Duration
		var rss int64
		for i := 0; i < *rounds; i++ {
			d, m, cpu, err := e.resumeAfter(f.d, f.do)
			if err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
			ds, cpus, rss = append(ds, d), append(cpus, cpu), max(rss, m)
		}
		fmt.Fprintf(os.Stderr, "%s%s: %s\n", f.name, at, median(ds).Round(time.Millisecond))
		fmt.Fprintf(b, "| %s%s | %s | %s; the client's RSS while it reconnects: %.1f MiB, its CPU time from the fault to the link's return: %s |\n", f.name, at, median(ds).Round(time.Millisecond), f.note, float64(rss)/1024, median(cpus))
	}

	// A download long enough to be cut: four times -size.
	n := 4 * *size
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	for _, every := range []time.Duration{0, 10 * time.Second} {
		var ds []time.Duration
		before := p.Stats().Resets
		for i := 0; i < *rounds; i++ {
			p.ResetEvery(every)
			c := e.ours("cocoonbox-ssh", "main", fmt.Sprintf("head -c %d /dev/zero", n))
			c.Stdout = null
			d, _, err := timed(c)
			p.ResetEvery(0)
			if err != nil {
				return err
			}
			ds = append(ds, d)
		}
		name, note := "download, no cut"+at, "through the same proxy"
		if every > 0 {
			name = fmt.Sprintf("download, a cut every %s%s", every, at)
			note = fmt.Sprintf("%d links reset in %d runs; each run ends with exit status 0 (byte-exactness across cuts is session_cut_tls's)", p.Stats().Resets-before, *rounds)
		}
		d := median(ds)
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, d.Round(time.Millisecond))
		fmt.Fprintf(b, "| %s | %s (%d MB/s, %d MiB) | %s |\n", name, d.Round(time.Millisecond), int(float64(n)/d.Seconds()/1e6), n>>20, note)
	}
	return nil
}

// tlsDial is the time to connect to addr and make a TLS handshake (the
// certificate unchecked: the handshake costs the same).
func tlsDial(addr string) (time.Duration, error) {
	start := time.Now()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		return 0, err
	}
	d := time.Since(start)
	c.Close()
	return d, nil
}

// plainEcho is the median of n runs of a plain Exec (a new client with
// resume off) echoing a line, from its start to the line.
func (e *env) plainEcho(n int) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < n; i++ {
		c := e.ours("cocoonbox-ssh", "main", "echo line")
		c.Env = append(slices.Clip(c.Env), "COCOONBOX_RESUME=off")
		out, err := c.StdoutPipe()
		if err != nil {
			return 0, err
		}
		var stderr bytes.Buffer
		c.Stderr = &stderr
		t0 := time.Now()
		if err := c.Start(); err != nil {
			return 0, err
		}
		_, err = bufio.NewReader(out).ReadString('\n')
		d := time.Since(t0)
		if werr := c.Wait(); err != nil || werr != nil {
			return 0, fmt.Errorf("plain Exec: %v %v: %s", err, werr, stderr.String())
		}
		ds = append(ds, d)
	}
	return median(ds), nil
}

// resumeAfter runs `cat` in the box, sends it a line every 5 ms, applies
// fault for d, and returns the time from the link's return to the first
// line echoed after it, the client's RSS during the fault, in KiB, and
// its CPU time from the fault to the link's return.
func (e *env) resumeAfter(d time.Duration, fault func(time.Duration)) (time.Duration, int64, time.Duration, error) {
	c := e.ours("cocoonbox-ssh", "main", "cat")
	in, err := c.StdinPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		return 0, 0, 0, err
	}
	lines := make(chan time.Time, 1<<16)
	go func() {
		r := bufio.NewReader(out)
		for {
			if _, err := r.ReadString('\n'); err != nil {
				close(lines)
				return
			}
			lines <- time.Now()
		}
	}()
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				in.Close()
				return
			case <-t.C:
				io.WriteString(in, "line\n")
			}
		}
	}()
	fail := func(err error) (time.Duration, int64, time.Duration, error) {
		close(stop)
		c.Process.Kill()
		c.Wait()
		return 0, 0, 0, fmt.Errorf("%w: %s", err, stderr.String())
	}
	if _, ok := <-lines; !ok {
		return fail(fmt.Errorf("no echo"))
	}
	cpu0 := cpuTime(c.Process.Pid)
	fault(d)
	back := time.Now().Add(d)
	time.Sleep(d / 2)
	rss := vmRSS(c.Process.Pid)
	time.Sleep(time.Until(back))
	cpu := cpuTime(c.Process.Pid) - cpu0
	var got time.Duration
	for t := range lines {
		if t.After(back) {
			got = t.Sub(back)
			break
		}
	}
	if got == 0 {
		return fail(fmt.Errorf("no echo after the link returned"))
	}
	close(stop)
	for range lines {
	}
	if err := c.Wait(); err != nil {
		return 0, 0, 0, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return got, rss, cpu, nil
}

// cpuTime is process pid's user and system CPU time so far (0 when
// unknown), in the kernel's clock ticks of 10 ms.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// detachedMemory writes the rows of memory per detached session: the
// box's session holder before and after detached sessions of commands
// that write nothing, and one that writes without stop.
func (e *env) detachedMemory(b *strings.Builder) error {
	const k = 20
	base := e.holderRSS()
	var clients []*exec.Cmd
	defer func() {
		for _, c := range clients {
			c.Process.Kill()
			c.Wait()
		}
	}()
	var clientRSS int64
	for i := 0; i < k; i++ {
		// Kept 20 s: they end on their own once measured.
		c := e.ours("cocoonbox-ssh", "main", "echo started; exec sleep 600")
		c.Env = append(c.Env, "COCOONBOX_RESUME_WINDOW=20s")
		out, err := c.StdoutPipe()
		if err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return err
		}
		clients = append(clients, c)
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			return fmt.Errorf("detached session %d did not start", i)
		}
		clientRSS += vmRSS(c.Process.Pid)
	}
	attached := e.holderRSS()
	for _, c := range clients {
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
	}
	clients = nil
	time.Sleep(time.Second)
	detached := e.holderRSS()
	fmt.Fprintf(b, "| box memory per detached session | %.0f KiB | the session holder's RSS: %.1f MiB before, %.1f MiB with %d attached sessions of `sleep`, %.1f MiB once their clients were killed (SIGKILL: no bye, so the box keeps them for the window) |\n",
		float64(detached-base)/k, float64(base)/1024, float64(attached)/1024, k, float64(detached)/1024)
	fmt.Fprintf(b, "| client memory per session | %.1f MiB | the RSS of an attached `cocoonbox-ssh main 'sleep 600'`, mean of %d |\n", float64(clientRSS)/k/1024, k)

	before := e.holderRSS()
	c := e.ours("cocoonbox-ssh", "main", "exec yes")
	c.Env = append(c.Env, "COCOONBOX_RESUME_WINDOW=20s")
	c.Stdout = io.Discard
	if err := c.Start(); err != nil {
		return err
	}
	time.Sleep(time.Second)
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	time.Sleep(2 * time.Second)
	full := e.holderRSS()
	fmt.Fprintf(b, "| box memory of a detached session whose command writes on | %.1f MiB | `yes` with its client killed: the holder keeps its output up to the bound (16 MiB a stream) and `yes` then waits |\n", float64(full-before)/1024)
	return nil
}

// vmRSS is the resident set of process pid in KiB (0 when unknown).
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// holderRSS is the summed RSS in KiB of this run's session holders
// (cocoonbox-session holder, cocoonbox-agent session holder, in a box
// under the work directory).
func (e *env) holderRSS() int64 {
	ents, _ := os.ReadDir("/proc")
	var sum int64
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")
		if len(args) < 2 || args[len(args)-1] != "holder" {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", ent.Name(), "cwd"))
		if !strings.HasPrefix(cwd, e.work+"/") {
			continue
		}
		if base := filepath.Base(args[0]); base == "cocoonbox-session" || base == "cocoonbox-agent" {
			sum += vmRSS(pid)
		}
	}
	return sum
}
