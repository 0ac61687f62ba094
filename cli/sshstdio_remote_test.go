//go:build unix

package cli_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/loopback"
)

// bgSSH is an ssh (or cocoonbox-ssh) running in the background, its
// stderr read line by line as it comes.
type bgSSH struct {
	cmd    *exec.Cmd
	lines  chan string
	exited chan struct{}
}

// startBG starts c and kills it when the test ends.
func startBG(t *testing.T, c *exec.Cmd) *bgSSH {
	t.Helper()
	r, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	b := &bgSSH{cmd: c, lines: make(chan string, 100), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			b.lines <- sc.Text()
		}
		close(b.lines)
		c.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		c.Process.Kill()
		<-b.exited
	})
	return b
}

// waitLine returns the first stderr line that re matches, with its
// submatches; it fails the test if ssh exits first or a minute passes.
func (b *bgSSH) waitLine(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var seen []string
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-b.lines:
			if !ok {
				t.Fatalf("%q ended before saying %s; it said %q", b.cmd.Args, re, seen)
			}
			seen = append(seen, l)
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-timeout:
			t.Fatalf("%q did not say %s in a minute; it said %q", b.cmd.Args, re, seen)
		}
	}
}

var allocatedRE = regexp.MustCompile(`^Allocated port ([0-9]+) for remote forward to (.*)$`)

// echoTarget is a TCP server on this machine (the laptop's end of a
// remote forward) that echoes what it reads and half-closes at EOF; it
// returns its port.
func echoTarget(t *testing.T) string {
	_, port := loopback.TCP(t, echo)
	return strconv.Itoa(int(port))
}

// echoThrough connects to addr (in the box: the local box shares this
// machine's loopback) and checks that 1 MiB sent comes back whole while
// it is still being sent.
func echoThrough(t *testing.T, network, addr string) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	defer c.Close()
	data := make([]byte, 1<<20)
	rand.Read(data)
	go c.Write(data)
	got := make([]byte, len(data))
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, data) {
		t.Errorf("through %s: %v; the echo differs from the 1 MiB sent", addr, err)
	}
}

// webTarget is an HTTP server on this machine that names the path asked
// for.
func webTarget(t *testing.T) string {
	t.Helper()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	t.Cleanup(web.Close)
	_, port, _ := net.SplitHostPort(web.Listener.Addr().String())
	return port
}

// waitFor polls cond until it holds; it fails the test if exited closes
// first (nil: never) or a minute passes.
func waitFor(t *testing.T, exited <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case <-exited:
			t.Fatal("the process exited first")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("not within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSSHStdioRemoteCancel: through a ControlMaster, ssh -O
// forward -R adds a remote forward to a running connection (printing the
// port the box chose) and ssh -O cancel -R ends it: the port no longer
// accepts, the socket is removed.
func TestSSHStdioRemoteCancel(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	web := webTarget(t)
	s.startMaster(t)

	out := runOK(t, s.cmd("-O", "forward", "-R", "0:localhost:"+web, "main.cocoonbox"))
	port := strings.TrimSpace(out)
	if got := runOK(t, exec.Command("curl", "-sS", "--noproxy", "*", "http://127.0.0.1:"+port+"/added")); got != "hello from /added" {
		t.Errorf("curl through -O forward -R: %q", got)
	}
	// OpenSSH's master finds the forward by the spec as given: port 0, as
	// with sshd.
	runOK(t, s.cmd("-O", "cancel", "-R", "0:localhost:"+web, "main.cocoonbox"))
	waitFor(t, nil, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
		}
		return err != nil
	})

	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	sock := filepath.Join(dir, "c.sock")
	runOK(t, s.cmd("-O", "forward", "-R", sock+":localhost:"+web, "main.cocoonbox"))
	if got := runOK(t, exec.Command("curl", "-sS", "--unix-socket", sock, "http://box/sock")); got != "hello from /sock" {
		t.Errorf("curl through -O forward -R SOCKET: %q", got)
	}
	runOK(t, s.cmd("-O", "cancel", "-R", sock+":localhost:"+web, "main.cocoonbox"))
	waitFor(t, nil, func() bool { _, err := os.Lstat(sock); return os.IsNotExist(err) })
}
