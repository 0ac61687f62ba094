package boxexec

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A box that sends what no honest exec server sends (an id the host never
// gave it, an exit before its started, a second started, an op of its
// own), as fast as it can, loses its connection at the first such message:
// its reads would cost the host's CPU outside the box's cgroup. A server
// that connects after it is served.
func TestExecFloodClosed(t *testing.T) {
	for _, flood := range []string{`{"op":"exit","id":7}`, `{"op":"started","id":7,"pid":1}`, `{"op":"nap","id":1}`, `{"op":"exit","id":1}`, `{"op":"started","id":1,"pid":1}`} {
		t.Run(flood, func(t *testing.T) {
			h, err := Listen(filepath.Join(t.TempDir(), "exec.sock"))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: h.path, Net: "unixpacket"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte(`{"op":"hello","version":1}`)); err != nil {
				t.Fatal(err)
			}
			if !h.WaitConnected(30 * time.Second) {
				t.Fatal("the box's connection was not taken")
			}
			// Command 1 is given to the box, which answers out of turn.
			child, _, _, _ := pipes(t)
			go h.Start(&Request{Path: "/bin/true", Args: []string{"true"}}, child[0], child[1], child[2])
			b := make([]byte, MaxRequest+1)
			if _, err := c.Read(b); err != nil {
				t.Fatal(err)
			}
			if flood == `{"op":"started","id":1,"pid":1}` {
				c.Write([]byte(flood)) // taken once
			}
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			for i := 0; ; i++ {
				if _, err := c.Write([]byte(flood)); err != nil {
					break // closed by the host
				}
				if i == 0 {
					// The host closes it: the read ends with no packet.
					if n, err := c.Read(b); n != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
						t.Fatalf("after %s the connection is open: read %d %v", flood, n, err)
					}
				}
			}
			go Serve(h.path)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				child, _, _, _ := pipes(t)
				x, err := h.Start(&Request{Path: "/bin/true", Args: []string{"true"}}, child[0], child[1], child[2])
				if err == nil {
					if ex := x.Wait(); ex.Err != nil || ex.Code != 0 {
						t.Fatalf("the server after the flood: %v", ex)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no server after the flood: %v", err)
				}
			}
		})
	}
}

// ListenPeer's check sees the pid of the process that connected, and a
// connection it refuses is closed before its hello: that process never
// becomes the box's exec server.
func TestExecPeerChecked(t *testing.T) {
	var seen []int
	var mu sync.Mutex
	h, err := ListenPeer(filepath.Join(t.TempDir(), "exec.sock"), func(pid int) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, pid)
		return errors.New("not in the box")
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	done := make(chan error, 1)
	go func() { done <- Serve(h.path) }()
	// Its connection ends, and Serve returns, without its hello taken.
	for ended := false; !ended; {
		if h.Connected() {
			t.Fatal("a refused server is connected")
		}
		select {
		case <-done:
			ended = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != os.Getpid() {
		t.Errorf("the check saw pids %v, want [%d]", seen, os.Getpid())
	}
}
