package share_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/flock"
	"github.com/cocoonbox/cocoonbox/localbox"
	"github.com/cocoonbox/cocoonbox/share"
)

// A real local box on loopback TCP and a real master, run in this process
// (the scripts in cli/testdata/script run it as its own process): a client
// goes through the master; when the master has gone, the same client's
// next call finds no one at the socket and goes to the box directly.
func TestClientFallsBackInProcess(t *testing.T) {
	dir := t.TempDir()
	lis, url, err := localbox.Listen(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := localbox.IssueToken(dir, "test", "cli")
	if err != nil {
		t.Fatal(err)
	}
	srv := &localbox.Server{Dir: dir}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	ep, err := box.ParseEndpoint(url)
	if err != nil {
		t.Fatal(err)
	}

	ctl, err := os.MkdirTemp("/tmp", "share")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ctl) })
	log := filepath.Join(ctl, "log")
	served := make(chan error, 1)
	sh := share.Sharing{Dir: filepath.Join(ctl, "control"), Log: log, Start: func(url, caFile, sock string, lock *os.File) error {
		// The lock is the caller's, closed when Start returns: the master
		// takes its own, as a child process inherits one.
		own, err := os.Open(lock.Name())
		if err != nil {
			return err
		}
		if err := flock.Lock(own, flock.Exclusive|flock.NoWait); err != nil && err != flock.ErrLocked {
			return err
		}
		m := &share.Master{URL: url, Dial: func(rtt time.Duration) (*share.Upstream, error) { return box.DialUpstream(ep, box.WithPathRTT(rtt)) }, Socket: sock, Lock: own, Persist: share.DefaultPersist, Log: log}
		go func() { served <- m.Serve() }()
		return nil
	}}

	run := func(c *box.Client, line string) string {
		t.Helper()
		var out bytes.Buffer
		st, err := c.Exec(context.Background(), &box.Command{Box: localbox.DefaultBox, Line: line, Stdout: &out})
		if err != nil || st.Code != 0 {
			t.Fatalf("%s: %v %v", line, st, err)
		}
		return out.String()
	}
	first, err := box.Dial(ep, tok, box.WithSharing(sh))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if got := run(first, "echo one"); got != "one\n" {
		t.Fatalf("got %q", got)
	}
	waitFor(t, log, "serving")

	c, err := box.Dial(ep, tok, box.WithSharing(sh))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := run(c, "echo two"); got != "two\n" {
		t.Fatalf("got %q", got)
	}
	if boxes, err := c.List(context.Background()); err != nil || len(boxes) != 1 {
		t.Fatalf("List through the master: %v, %v", boxes, err)
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "via master") || !strings.Contains(string(b), "call /cocoonbox.control.v1.Session/Exec") || !strings.Contains(string(b), "call /cocoonbox.control.v1.Boxes/List") {
		t.Fatalf("the second client did not go through the master; the log:\n%s", b)
	}

	// Its socket removed, the master exits and closes its side.
	socks, _ := filepath.Glob(filepath.Join(sh.Dir, "*.sock"))
	if len(socks) != 1 {
		t.Fatalf("sockets %v, want one", socks)
	}
	os.Remove(socks[0])
	if err := <-served; err != nil {
		t.Fatalf("master: %v", err)
	}
	before, _ := os.ReadFile(log)
	// A unary call first, then a stream, both from the client of the master.
	if boxes, err := c.List(context.Background()); err != nil || len(boxes) != 1 {
		t.Fatalf("List after the master: %v, %v", boxes, err)
	}
	if got := run(c, "echo three"); got != "three\n" {
		t.Fatalf("got %q", got)
	}
	after, _ := os.ReadFile(log)
	if n := strings.Count(string(after), "call "); n != strings.Count(string(before), "call ") {
		t.Fatalf("the call after the master went through a master; the log:\n%s", after)
	}
}

func waitFor(t *testing.T, log, what string) {
	t.Helper()
	for range 6000 {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), what) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(log)
	t.Fatalf("no %q in the log:\n%s", what, b)
}
