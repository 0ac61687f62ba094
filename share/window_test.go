package share_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/faultproxy"
	"github.com/cocoonbox/cocoonbox/internal/flock"
	"github.com/cocoonbox/cocoonbox/internal/window"
	"github.com/cocoonbox/cocoonbox/localbox"
	"github.com/cocoonbox/cocoonbox/share"
)

// countWriter counts what it is given; onWrite, if set, runs first.
type countWriter struct {
	n       atomic.Int64
	onWrite func()
}

func (w *countWriter) Write(p []byte) (int, error) {
	if w.onWrite != nil {
		w.onWrite()
	}
	w.n.Add(int64(len(p)))
	return len(p), nil
}

// A real local box behind a proxy that adds 100 ms of round trip, and a
// real master in this process: the master sizes its windows to the
// measured round trip (window.ForRTT, 64 MiB a stream there, not the
// default 16); two downloads at once both progress; and a download whose
// reader stops holds no more than its windows: the box's command is held
// back once the master's window and the local hop's are full, while
// another download on the same connection runs to its end.
func TestWindowsAtDistance(t *testing.T) {
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
	px, err := faultproxy.Listen("127.0.0.1:0", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	px.Delay(100 * time.Millisecond)
	ep, err := box.ParseEndpoint("http://" + px.Addr())
	if err != nil {
		t.Fatal(err)
	}

	ctl, err := os.MkdirTemp("/tmp", "share")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ctl) })
	log := filepath.Join(ctl, "log")
	sh := share.Sharing{Dir: filepath.Join(ctl, "control"), Log: log, MinRTT: 2 * time.Millisecond, Start: func(url, caFile, sock string, lock *os.File) error {
		own, err := os.Open(lock.Name())
		if err != nil {
			return err
		}
		if err := flock.Lock(own, flock.Exclusive|flock.NoWait); err != nil && err != flock.ErrLocked {
			return err
		}
		m := &share.Master{URL: url, Dial: func(rtt time.Duration) (*share.Upstream, error) { return box.DialUpstream(ep, box.WithPathRTT(rtt)) }, Socket: sock, Lock: own, Persist: share.DefaultPersist, Log: log}
		go m.Serve()
		return nil
	}}
	first, err := box.Dial(ep, tok, box.WithSharing(sh))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if st, err := first.Exec(context.Background(), &box.Command{Box: localbox.DefaultBox, Line: "true"}); err != nil || st.Code != 0 {
		t.Fatal(st, err)
	}
	waitFor(t, log, "serving")
	// The round trip measured is at least the proxy's 100 ms: the cap.
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), fmt.Sprintf("stream window %d MiB", window.MaxStream>>20)) {
		t.Fatalf("the master did not size its windows to the path; the log:\n%s", b)
	}
	c, err := box.Dial(ep, tok, box.WithSharing(sh))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	download := func(ctx context.Context, n int64, w *countWriter) error {
		st, err := c.Exec(ctx, &box.Command{Box: localbox.DefaultBox, Line: fmt.Sprintf("head -c %d /dev/zero", n), Stdout: w})
		if err == nil && st.Code != 0 {
			err = fmt.Errorf("exit %d", st.Code)
		}
		if err == nil && w.n.Load() != n {
			err = fmt.Errorf("got %d bytes, want %d", w.n.Load(), n)
		}
		return err
	}

	// Two at once: when either ends, the other has come a quarter of the way.
	const size = 32 << 20
	var a, b countWriter
	var other [2]int64
	var wg sync.WaitGroup
	for i, w := range []*countWriter{&a, &b} {
		wg.Go(func() {
			if err := download(context.Background(), size, w); err != nil {
				t.Error(err)
			}
			other[i] = []*countWriter{&b, &a}[i].n.Load()
		})
	}
	wg.Wait()
	for i, n := range other {
		if n < size/4 {
			t.Errorf("stream %d ended with the other at %d of %d bytes: it starved", i, n, size)
		}
	}

	// A stalled reader: its command writes 1 MiB at a time and counts
	// them in a file, so the box says how far it got.
	const stalledMiB = 128
	release := make(chan struct{})
	var once sync.Once
	started := make(chan struct{})
	stalled := &countWriter{onWrite: func() {
		once.Do(func() { close(started) })
		<-release
	}}
	line := fmt.Sprintf("i=0; while [ $i -lt %d ]; do head -c 1048576 /dev/zero || exit 1; i=$((i+1)); echo $i >progress; done", stalledMiB)
	done := make(chan error, 1)
	go func() {
		st, err := c.Exec(context.Background(), &box.Command{Box: localbox.DefaultBox, Line: line, Stdout: stalled})
		if err == nil && st.Code != 0 {
			err = fmt.Errorf("exit %d", st.Code)
		}
		done <- err
	}()
	<-started
	// Another stream on the same connection runs to its end meanwhile.
	if err := download(context.Background(), 64<<20, &countWriter{}); err != nil {
		t.Fatalf("beside a stalled stream: %v", err)
	}
	progress := func() int64 {
		var out strings.Builder
		st, err := c.Exec(context.Background(), &box.Command{Box: localbox.DefaultBox, Line: "cat progress", Stdout: &out})
		if err != nil || st.Code != 0 {
			t.Fatal(st, err)
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
		return n
	}
	// It fills the windows, then stops: held within the windows of the
	// two hops (the master's, the local one's) and a few MiB of buffers
	// and pipes; past what the default windows would hold, which shows
	// the sized one in use.
	const slack = 8
	least := int64(window.Stream+window.LocalStream)>>20 + slack
	bound := int64(window.MaxStream+window.LocalStream)>>20 + slack
	var got int64
	for range 240 {
		n := progress()
		if n == got && n > least {
			break
		}
		got = n
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("the stalled stream's command wrote %d MiB", got)
	if got <= least || got > bound {
		t.Fatalf("a stalled stream's command wrote %d MiB: want more than %d (what the default windows hold) and at most %d (the sized windows and buffers)", got, least, bound)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if stalled.n.Load() != stalledMiB<<20 {
		t.Fatalf("the stalled stream got %d bytes, want %d", stalled.n.Load(), stalledMiB<<20)
	}
}
