package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/window"
)

// The latency table's markers in docs/benchmarks.md.

// OpenSSH's channel window, which caps one stream at window/RTT; ours is
// the control master's, sized to the round trip (window.ForRTT).
const sshWindow = 2 << 20

// latencyWorkloads are the rows of the latency table.
var latencyWorkloads = []string{"startup", "download", "upload", "sftp requests via ssh --stdio", "git clone", "rsync (first)", "rsync (no-op)"}

// runLatency runs the latency table: the local box over TLS on loopback,
// and for each round trip a delay proxy in front of it and one in front of
// sshd, both paths through their own proxy of the same delay.
func (e *env) runLatency(top string) error {
	ms, tb, err := e.rttBox()
	if err != nil {
		return err
	}
	defer tb.stop()
	boxPort := tb.port
	sshPort, err := sshdPort(e.sshCfg)
	if err != nil {
		return err
	}
	if err := e.writeStdioConfig(); err != nil {
		return fmt.Errorf("ssh --stdio: %w", err)
	}
	baseEnv, baseCfg, fullSize, fullReqs := e.boxEnv, e.sshCfg, *size, *sftpReqs
	e.latency = true
	defer func() { e.boxEnv, e.sshCfg, *size, *sftpReqs, e.latency = baseEnv, baseCfg, fullSize, fullReqs, false }()

	var rows []rttRow
	for _, rtt := range ms {
		d := time.Duration(rtt) * time.Millisecond
		pb, err := startDelay(fmt.Sprintf("127.0.0.1:%d", boxPort), d)
		if err != nil {
			return err
		}
		ps, err := startDelay(fmt.Sprintf("127.0.0.1:%d", sshPort), d)
		if err != nil {
			pb.Close()
			return err
		}
		e.boxEnv = tb.through(baseEnv, pb.Port())
		e.sshCfg = filepath.Join(e.work, fmt.Sprintf("ssh_config_rtt%d", rtt))
		if err := writePortConfig(baseCfg, e.sshCfg, ps.Port()); err != nil {
			return err
		}
		*size, *sftpReqs = fullSize, fullReqs
		if rtt > 0 {
			*size, *sftpReqs = *rttSize, *rttSftpReqs
		}
		for _, w := range e.workloads() {
			if !contains(latencyWorkloads, strings.TrimPrefix(w.name, "resumable ")) || !selected(w.name) {
				continue
			}
			w.limit = nil
			if w.bytes > 0 && rtt > 0 {
				// What the delay proxy itself carries at this round trip,
				// in the same rounds: the ceiling of either path.
				w.limit = func() (time.Duration, error) { return tcpCopy(w.bytes, d) }
			}
			if w.setup != nil {
				if err := w.setup(); err != nil {
					return fmt.Errorf("%s: setup: %w", w.name, err)
				}
			}
			r, err := measure(w)
			if err != nil {
				return fmt.Errorf("%d ms %s: %w", rtt, w.name, err)
			}
			fmt.Fprintf(os.Stderr, "%3d ms %-14s ours %8s  ssh %8s  ratio %.2f  CPU %s\n", rtt, w.name, r.ours.Round(time.Millisecond), r.ssh.Round(time.Millisecond), r.ratio, cpuCell(r))
			rows = append(rows, rttRow{rtt: d, result: r})
		}
		pb.Close()
		ps.Close()
	}
	return publish(top, "bench-rtt", fmt.Sprintf("; %d rounds; transfers of %d MiB at 0 ms and %d MiB above; %s",
		*rounds, fullSize>>20, *rttSize>>20, version("ssh", "-V")), renderRTT(rows))
}

// parseRTTs reads -rtt: round trips in whole milliseconds.
func parseRTTs() ([]int, error) {
	var ms []int
	for _, f := range strings.Split(*rtts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-rtt %q: want round trips in whole milliseconds, like 0,10,50,100", *rtts)
		}
		ms = append(ms, n)
	}
	return ms, nil
}

// rttBox is -rtt's round trips and a local box over TLS (startTLSBox) to
// put behind a delay proxy of each.
func (e *env) rttBox() ([]int, *tlsBox, error) {
	ms, err := parseRTTs()
	if err != nil {
		return nil, nil, err
	}
	tb, err := e.startTLSBox()
	if err != nil {
		return nil, nil, err
	}
	return ms, tb, nil
}

// tlsBox is a local box served over TLS on a loopback port, with the
// token localbox start saved for it and its self-signed certificate.
type tlsBox struct {
	port      int
	token, ca string
	stop      func()
}

// startTLSBox starts the local box with --tls self-signed on a free
// loopback port.
func (e *env) startTLSBox() (*tlsBox, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	stop, err := e.startBox("--listen", fmt.Sprintf("127.0.0.1:%d", port), "--tls", "self-signed")
	if err != nil {
		return nil, fmt.Errorf("local box: %w", err)
	}
	home := filepath.Join(e.work, "home")
	cfgDir, err := box.ConfigDir(func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	})
	if err != nil {
		stop()
		return nil, err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	cred, err := auth.FileStore{Dir: cfgDir}.Get(url)
	if err != nil {
		stop()
		return nil, fmt.Errorf("the local box's token for %s: %w", url, err)
	}
	ca := filepath.Join(home, ".local", "state", "cocoonbox", "localbox", "tls", "self-signed.crt")
	return &tlsBox{port: port, token: cred.Token, ca: ca, stop: stop}, nil
}

// through is env with the box's endpoint at the delay proxy on port, its
// token and its certificate.
func (t *tlsBox) through(env []string, port int) []string {
	return append(append([]string(nil), env...),
		fmt.Sprintf("COCOONBOX_ENDPOINT=https://127.0.0.1:%d", port),
		"COCOONBOX_TOKEN="+t.token, "COCOONBOX_CA_FILE="+t.ca)
}

// rttRow is one workload's result at one round trip.
type rttRow struct {
	rtt time.Duration
	result
}

// renderRTT makes the latency table. Round trips a row spends are
// estimated from the same row at 0 ms, when the table has it:
// (time - time at 0 ms) / RTT.
func renderRTT(rows []rttRow) string {
	zero := map[string]result{}
	for _, r := range rows {
		if r.rtt == 0 {
			zero[r.name] = r.result
		}
	}
	var b strings.Builder
	b.WriteString("| RTT | workload | ours, TLS | ssh | ours/ssh | CPU ours/ssh (ours, ssh) | our client's peak RSS | what limits it |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		ours, ssh := r.ours.Round(time.Millisecond).String(), r.ssh.Round(time.Millisecond).String()
		if r.bytes > 0 {
			ours += fmt.Sprintf(" (%s)", rate(r.bytes, r.ours))
			ssh += fmt.Sprintf(" (%s)", rate(r.bytes, r.ssh))
		}
		rss := ""
		if r.rss > 0 {
			rss = fmt.Sprintf("%.1f MiB", float64(r.rss)/1024)
		}
		var limit string
		switch {
		case r.rtt == 0 && r.bytes > 0:
			limit = "CPU (TLS and SSH ciphers, copies)"
		case r.rtt == 0:
			limit = "CPU and process start"
		case r.nreq > 0:
			per := func(d time.Duration) float64 { return float64(d) / float64(r.nreq) / float64(r.rtt) }
			limit = fmt.Sprintf("round trips per request (%d requests): ours ≈ %.2f, ssh ≈ %.2f", r.nreq, per(r.ours), per(r.ssh))
		case r.bytes > 0:
			cap := func(w int) string { return fmt.Sprintf("%.0f MB/s", float64(w)/r.rtt.Seconds()/1e6) }
			ours, _ := window.ForRTT(r.rtt)
			limit = fmt.Sprintf("window/RTT: ours ≤ %s (%d MiB stream window, the master's for this RTT), ssh ≤ %s (%d MiB channel window)", cap(int(ours)), ours>>20, cap(sshWindow), sshWindow>>20)
			if r.limit > 0 {
				limit += fmt.Sprintf("; the proxy alone carries %s, ours %.0f%% of it", rate(r.bytes, r.limit), 100*float64(r.limit)/float64(r.ours))
			}
		default:
			limit = "round trips"
			if z, ok := zero[r.name]; ok {
				rt := func(d, d0 time.Duration) float64 { return float64(d-d0) / float64(r.rtt) }
				limit = fmt.Sprintf("round trips: ours ≈ %.1f, ssh ≈ %.1f", rt(r.ours, z.ours), rt(r.ssh, z.ssh))
			}
		}
		fmt.Fprintf(&b, "| %d ms | %s | %s | %s | %.2f | %s | %s | %s |\n", r.rtt.Milliseconds(), r.name, ours, ssh, r.ratio, cpuCell(r.result), rss, limit)
	}
	return b.String()
}

// sshdPort reads the Port line of the bench's ssh_config.
func sshdPort(cfg string) (int, error) {
	b, err := os.ReadFile(cfg)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Port" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("%s names no Port", cfg)
}

// writePortConfig writes the ssh_config from with its Port replaced.
func writePortConfig(from, to string, port int) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Port" {
			l = fmt.Sprintf("  Port %d", port)
		}
		out = append(out, l)
	}
	return os.WriteFile(to, []byte(strings.Join(out, "\n")), 0o600)
}
