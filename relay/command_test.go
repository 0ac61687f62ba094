package relay

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/loopback"
)

// target listens on loopback; each connection gets greeting at once, then
// "got:" and everything read up to the client's EOF, then a close.
func target(t *testing.T, greeting string) (host string, port uint32) {
	t.Helper()
	return loopback.TCP(t, func(c net.Conn) {
		io.WriteString(c, greeting)
		if greeting != "" {
			return
		}
		b, _ := io.ReadAll(c)
		c.Write(append([]byte("got:"), b...))
	})
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) uint32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return uint32(p)
}

// pathWith is a PATH directory holding only the named real programs: no
// cocoonbox-agent, so Command falls back.
func pathWith(t *testing.T, progs ...string) string {
	dir := t.TempDir()
	for _, p := range progs {
		real, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("%s is needed (scripts/deps.sh installs it): %v", p, err)
		}
		if p == "python3" {
			// A version manager's shim needs its own PATH: link the interpreter.
			out, err := exec.Command(real, "-c", "import sys; print(sys.executable)").Output()
			if err != nil {
				t.Fatal(err)
			}
			real = strings.TrimSpace(string(out))
		}
		if err := os.Symlink(real, filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runCommand runs Command(host, port) with /bin/sh as a box would, on PATH
// dir, with stdin in; it returns stdout, stderr and the exit status.
func runCommand(t *testing.T, dir, host string, port uint32, in string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", Command(host, port))
	cmd.Env = []string{"PATH=" + dir}
	cmd.Stdin = strings.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func TestCommandFallbacks(t *testing.T) {
	ready := string(rune(Ready))
	t.Run("python3 half-close", func(t *testing.T) {
		host, port := target(t, "")
		out, errs, code := runCommand(t, pathWith(t, "python3"), host, port, "hello")
		if code != 0 || out != ready+"got:hello" || errs != "" {
			t.Errorf("got %q, stderr %q, exit %d; want %q, exit 0", out, errs, code, ready+"got:hello")
		}
	})
	t.Run("python3 refused", func(t *testing.T) {
		out, errs, code := runCommand(t, pathWith(t, "python3"), "127.0.0.1", closedPort(t), "")
		if code != ExitConnect || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "refused") {
			t.Errorf("got %q, stderr %q, exit %d; want nothing, one line, exit %d", out, errs, code, ExitConnect)
		}
	})
	t.Run("bash", func(t *testing.T) {
		// bash cannot half-close: the target speaks first here.
		host, port := target(t, "hi from the target\n")
		out, errs, code := runCommand(t, pathWith(t, "bash", "cat"), host, port, "")
		if code != 0 || out != ready+"hi from the target\n" || errs != "" {
			t.Errorf("got %q, stderr %q, exit %d", out, errs, code)
		}
	})
	t.Run("bash refused", func(t *testing.T) {
		out, errs, code := runCommand(t, pathWith(t, "bash", "cat"), "127.0.0.1", closedPort(t), "")
		if code != ExitConnect || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("got %q, stderr %q, exit %d; want nothing, one line, exit %d", out, errs, code, ExitConnect)
		}
	})
	t.Run("none", func(t *testing.T) {
		out, errs, code := runCommand(t, t.TempDir(), "127.0.0.1", 22, "")
		if code != ExitNoRelay || out != "" || !strings.Contains(errs, "no relay") || strings.Count(errs, "\n") != 1 {
			t.Errorf("got %q, stderr %q, exit %d; want one refusal line, exit %d", out, errs, code, ExitNoRelay)
		}
	})
}

func TestCheckTarget(t *testing.T) {
	for _, tc := range []struct {
		host string
		port uint32
		ok   bool
	}{
		{"localhost", 80, true},
		{"127.0.0.1", 65535, true},
		{"::1", 22, true},
		{"fe80::1%eth0", 22, true},
		{"my-host.example_1", 1, true},
		{"", 80, false},
		{"-oProxyCommand=x", 80, false},
		{"a b", 80, false},
		{"a'b", 80, false},
		{"$(reboot)", 80, false},
		{"a/b", 80, false},
		{"[::1]", 80, false},
		{"host", 0, false},
		{"host", 65536, false},
		{strings.Repeat("a", 256), 80, false},
	} {
		if err := CheckTarget(tc.host, tc.port); (err == nil) != tc.ok {
			t.Errorf("CheckTarget(%q, %d) = %v, want ok %v", tc.host, tc.port, err, tc.ok)
		}
	}
}

func TestServe(t *testing.T) {
	host, port := target(t, "")
	var out bytes.Buffer
	if err := Serve(context.Background(), host, port, strings.NewReader("ping"), &out, true, nil); err != nil {
		t.Fatal(err)
	}
	if want := string(rune(Ready)) + "got:ping"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	out.Reset()
	err := Serve(context.Background(), "127.0.0.1", closedPort(t), strings.NewReader(""), &out, true, nil)
	if _, ok := err.(*ConnectError); !ok || out.Len() != 0 {
		t.Errorf("refused: got %v (%T), output %q; want a *ConnectError and nothing written", err, err, out.String())
	}
	if err != nil && !strings.HasSuffix(err.Error(), ": connection refused") {
		t.Errorf("refused: message %q", err)
	}
}

// TestServeEOF: with an eof writer, the target's EOF is the eof line
// (counting the ready byte), and what comes on stdin after it still
// reaches the target before Serve ends.
func TestServeEOF(t *testing.T) {
	got := make(chan string, 1)
	host, port := loopback.TCP(t, func(c net.Conn) {
		c.Write([]byte("hi"))
		c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		got <- string(b)
	})
	inR, inW := io.Pipe()
	var out, eof syncBuffer
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), host, port, inR, &out, true, &eof) }()
	for eof.String() == "" {
		select {
		case err := <-done:
			t.Fatalf("Serve ended at the target's EOF: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if eof.String() != "eof 3\n" || out.String() != string(rune(Ready))+"hi" {
		t.Errorf("at the target's EOF: stdout %q, eof %q; want the ready byte and hi, eof 3", out.String(), eof.String())
	}
	inW.Write([]byte("after"))
	inW.Close()
	if err := <-done; err != nil {
		t.Error(err)
	}
	if s := <-got; s != "after" {
		t.Errorf("the target read %q after its EOF, want after", s)
	}
}

// syncBuffer is a bytes.Buffer safe to read while Serve writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
