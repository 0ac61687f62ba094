package offload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// The preflight's questions to the laptop's OS. Each command's output goes
// through a parser of its own (parseLsofListen, parseScutilDNS,
// parseProcNetTCP) that the tests feed with recorded real output of that
// platform (testdata/macos); docs/offload.md lists each
// command and what it reads.

// lsofListen is the macOS command that lists listening TCP sockets:
// numeric hosts and ports (-nP), TCP sockets in LISTEN only.
var lsofListen = []string{"lsof", "-nP", "-iTCP", "-sTCP:LISTEN"}

// ListeningPorts returns this machine's listening TCP ports: from
// /proc/net/tcp and tcp6 on Linux, lsof -nP -iTCP -sTCP:LISTEN elsewhere
// (macOS). A machine with no lsof, or where it lists nothing, has none.
func ListeningPorts(ctx context.Context, goos string) (map[int]bool, error) {
	if goos == "linux" {
		ports := map[int]bool{}
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			if b, err := os.ReadFile(f); err == nil {
				for n := range parseProcNetTCP(b) {
					ports[n] = true
				}
			}
		}
		return ports, nil
	}
	// lsof exits 1 when nothing listens; what it printed still counts.
	out, _ := exec.CommandContext(ctx, lsofListen[0], lsofListen[1:]...).Output()
	return parseLsofListen(out), nil
}

// parseProcNetTCP reads the listening ports of Linux's /proc/net/tcp or
// tcp6: the rows whose st column is 0A (LISTEN), their local port in hex.
func parseProcNetTCP(b []byte) map[int]bool {
	ports := map[int]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 4 || fl[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(fl[1], ":")
		if b, err := hex.DecodeString(hexPort); ok && err == nil && len(b) == 2 {
			ports[int(b[0])<<8|int(b[1])] = true
		}
	}
	return ports
}

// parseLsofListen reads lsof's table (COMMAND PID USER FD TYPE DEVICE
// SIZE/OFF NODE NAME): on each row that ends in (LISTEN), the NAME before
// it is HOST:PORT (*:5000, 127.0.0.1:5432, [::1]:3000). Rows are read from
// the end because COMMAND may hold spaces. A port lsof printed as a
// service name (without -P) is not a number and is left out.
func parseLsofListen(out []byte) map[int]bool {
	ports := map[int]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		fl := strings.Fields(l)
		if len(fl) < 2 || fl[len(fl)-1] != "(LISTEN)" {
			continue
		}
		name := fl[len(fl)-2]
		if i := strings.LastIndexByte(name, ':'); i >= 0 {
			if n, err := strconv.Atoi(name[i+1:]); err == nil && n > 0 && n < 1<<16 {
				ports[n] = true
			}
		}
	}
	return ports
}

// scutilDNS is the macOS command that prints the resolver configuration,
// the scoped resolvers a VPN or /etc/resolver adds included.
var scutilDNS = []string{"scutil", "--dns"}

// SplitDNSDomains returns the domains that macOS's scoped resolvers
// serve (scutil --dns), which a VPN client adds; none elsewhere, and none
// when scutil fails.
func SplitDNSDomains(ctx context.Context, goos string) []string {
	if goos != "darwin" {
		return nil
	}
	out, err := exec.CommandContext(ctx, scutilDNS[0], scutilDNS[1:]...).Output()
	if err != nil {
		return nil
	}
	return parseScutilDNS(out)
}

// parseScutilDNS reads the "domain : NAME" lines of scutil --dns, each
// domain once, in order, without a final dot. A search domain is no split
// domain, and the multicast resolvers (local, *.arpa) are left out.
func parseScutilDNS(out []byte) []string {
	var ds []string
	for _, l := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok || strings.TrimSpace(k) != "domain" {
			continue
		}
		d := strings.TrimSuffix(strings.TrimSpace(v), ".")
		if d != "" && d != "local" && !strings.HasSuffix(d, ".arpa") && !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	return ds
}
