package cli_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// freezer is a TCP proxy that can stop forwarding while keeping its
// connections open: to the client the box looks alive to TCP but silent,
// as behind a dead NAT or a suspended laptop's network.
type freezer struct {
	lis    net.Listener
	mu     sync.Mutex
	frozen bool
	thaw   chan struct{} // closed when the test ends
}

func startFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{lis: lis, thaw: make(chan struct{})}
	t.Cleanup(func() {
		close(f.thaw)
		lis.Close()
	})
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go f.pipe(c, u)
			go f.pipe(u, c)
		}
	}()
	return f
}

// pipe copies from src to dst until an error, holding data once frozen.
func (f *freezer) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		f.mu.Lock()
		frozen := f.frozen
		f.mu.Unlock()
		if frozen {
			<-f.thaw
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// TestSSHKeepalive: when the connection stops answering mid-command, the
// gRPC keepalive (shortened with COCOONBOX_KEEPALIVE) ends cocoonbox-ssh
// with 255 and one line instead of a hang.
func TestSSHKeepalive(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	f := startFreezer(t, b.Addr)
	shim, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(shim, "main", "echo started; exec sleep 600")
	cmd.Env = append(append([]string{}, b.Env...), "COCOONBOX_ENDPOINT=http://"+f.lis.Addr().String(), "COCOONBOX_KEEPALIVE=10s,1s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "started\n" {
		t.Fatalf("first line %q, %v; stderr: %s", line, err, stderr.String())
	}
	f.freeze()
	io.Copy(io.Discard, stdout)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 255 {
		t.Errorf("exit status %d, want 255", code)
	}
	msg := stderr.String()
	t.Logf("stderr: %q", msg)
	if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "cocoonbox-ssh: ") || !strings.Contains(msg, "keepalive") {
		t.Errorf("stderr %q, want one line naming the keepalive", msg)
	}
}
