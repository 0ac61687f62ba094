//go:build unix

package localbox_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// lineWriter tells when a line has been written to it.
type lineWriter struct {
	got  chan struct{}
	done bool
}

func (w *lineWriter) Write(b []byte) (int, error) {
	if !w.done && strings.Contains(string(b), "\n") {
		w.done = true
		close(w.got)
	}
	return len(b), nil
}

// With MaxStream, an Exec that lives that long is reset, as a load
// balancer ends a stream: the client gets no exit and no status of the
// server's but a transport error (INTERNAL, RST_STREAM), the command is
// ended as when its client goes, and the connection serves the next call.
// Without the cap the same command runs on past it.
func TestMaxStream(t *testing.T) {
	dir := t.TempDir()
	srv := &localbox.Server{Dir: dir, Logf: t.Logf, MaxStream: 2 * time.Second}
	lis, base, err := localbox.Listen(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	run(t, srv, lis)
	tok, err := localbox.IssueToken(dir, "test", "cli")
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, base, tok)
	pidFile := filepath.Join(t.TempDir(), "pid")
	pr, pw := io.Pipe()
	defer pw.Close()
	out := &lineWriter{got: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.Exec(ctx, &box.Command{Box: "main", Line: "echo $$ > " + pidFile + "; echo started; exec sleep 600", Stdin: pr, Stdout: out})
	if err == nil {
		t.Fatalf("Exec ended with %+v past the cap, want a reset", st)
	}
	if !strings.Contains(err.Error(), "RST_STREAM") {
		t.Errorf("Exec: %v, want a stream reset", err)
	}
	select {
	case <-out.got:
	default:
		t.Errorf("the command's output did not come before the reset")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) still runs after its stream was reset", pid)
		}
	}
	if got := runIn(t, c, "main", "echo after"); got != "after\n" {
		t.Errorf("the next call on the connection: %q", got)
	}
}

// A stream shorter than the cap ends as always, with its exit.
func TestMaxStreamShort(t *testing.T) {
	dir := t.TempDir()
	srv := &localbox.Server{Dir: dir, Logf: t.Logf, MaxStream: time.Hour}
	lis, base, err := localbox.Listen(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	run(t, srv, lis)
	tok, err := localbox.IssueToken(dir, "test", "cli")
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, base, tok)
	big := strings.Repeat("0123456789abcdef", 1<<16)
	var out strings.Builder
	st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: "cat; exit 3", Stdin: strings.NewReader(big), Stdout: &out})
	if err != nil || st.Code != 3 || out.String() != big {
		t.Fatalf("Exec = %+v, %v, %d bytes of %d", st, err, out.Len(), len(big))
	}
}
