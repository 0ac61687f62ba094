package cli_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/loopback"
)

// silentTarget listens on the box's loopback (the local box shares this
// machine's), accepts and then neither reads nor writes, as a stuck
// server does; it returns its port.
func silentTarget(t *testing.T) string {
	t.Helper()
	stop := make(chan struct{})
	_, port := loopback.TCP(t, func(net.Conn) { <-stop })
	t.Cleanup(func() { close(stop) })
	return strconv.Itoa(int(port))
}

// relayPIDs are the box processes relaying to 127.0.0.1:port: the agent's
// relay verb (or a fallback's interpreter) with the port in its argv,
// read from /proc.
func relayPIDs(port string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) > 1 && strings.Contains(string(b), "relay") && args[len(args)-1] == port && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitRelays waits until n relays to port run (true), or 10 s pass.
func waitRelays(t *testing.T, port string, n int) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if len(relayPIDs(port)) == n {
			return true
		}
	}
	return false
}

// TestSSHRelayEndsWithChannel: a direct-tcpip channel to a target that
// never answers is closed by the client; the relay in the box ends with
// it (within 10 s; it would otherwise run as long as the connection).
func TestSSHRelayEndsWithChannel(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	port := silentTarget(t)
	c := goClient(t, b)
	p, _ := strconv.Atoi(port)
	ch, err := c.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatal(err)
	}
	if !waitRelays(t, port, 1) {
		t.Fatalf("no relay to port %s in the box", port)
	}
	ch.Close()
	if !waitRelays(t, port, 0) {
		t.Errorf("relay %v still runs 10 s after its channel closed", relayPIDs(port))
	}
	// The connection still serves.
	if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err != nil {
		t.Error(err)
	}
}

// TestSSHForwardRelayEndsWithClient: cocoonbox-ssh's own -L to a target
// that never answers; the local client resets its connection (a closed
// socket with unread data, or SO_LINGER 0): the relay in the box ends
// (within 10 s). A plain close is a half-close, passed on as EOF: the
// relay then waits for the target, as OpenSSH's own -L and sshd do.
func TestSSHForwardRelayEndsWithClient(t *testing.T) {
	t.Parallel()
	tb := startBox(t)
	port := silentTarget(t)
	lp, _ := freePort()
	if ready, _ := startLine(t, shimCmd(tb, "-o", "ExitOnForwardFailure=yes", "-L", lp+":127.0.0.1:"+port, "main", "echo ready; exec sleep 600")); ready != "ready" {
		t.Fatalf("got %q", ready)
	}
	conn, err := net.Dial("tcp", "127.0.0.1:"+lp)
	if err != nil {
		t.Fatal(err)
	}
	if !waitRelays(t, port, 1) {
		t.Fatalf("no relay to port %s in the box", port)
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
	if !waitRelays(t, port, 0) {
		t.Errorf("relay %v still runs 10 s after its client reset the connection", relayPIDs(port))
	}
}
