//go:build unix

package localbox

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// Past a source's cap the gate closes, of that source's connections and
// never the one just admitted, first one whose peer has gone, then one
// that has sent nothing (the oldest), then the one silent longest, bytes
// waiting to be read counting as sent now; by the kernel's view of real
// sockets, not by age.
func TestGateVictimOrder(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	g := newGate(100, 3, time.Hour, nil)
	type pair struct {
		client net.Conn
		a      *anonConn
	}
	conns := map[string]pair{}
	var names []string
	admit := func(name string) pair {
		t.Helper()
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := lis.Accept()
		if err != nil {
			t.Fatal(err)
		}
		p := pair{c, g.admit(s)}
		t.Cleanup(func() { p.a.Close() })
		conns[name] = p
		names = append(names, name)
		return p
	}
	// closed checks which are closed, in the order they came.
	closed := func(want ...string) {
		t.Helper()
		var got []string
		for _, n := range names {
			if conns[n].a.elem == nil {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("closed %v; want %v", got, want)
		}
	}
	// heard sent a byte that was read; gone's peer closed; silent sent
	// nothing.
	heard := admit("heard")
	heard.client.Write([]byte("x"))
	if _, err := io.ReadFull(heard.a, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	gone := admit("gone")
	gone.client.Close()
	waitFor(t, "the peer's FIN", func() bool { _, g := peerState(gone.a.Conn); return g })
	admit("silent")
	admit("new1")
	closed("gone")
	pending := admit("pending")
	closed("gone", "silent")
	pending.client.Write([]byte("y"))
	waitFor(t, "the byte to arrive", func() bool { p, _ := peerState(pending.a.Conn); return p })
	// new1 has sent nothing.
	admit("new2")
	closed("gone", "silent", "new1")
	conns["new2"].client.Write([]byte("z"))
	waitFor(t, "the byte to arrive", func() bool { p, _ := peerState(conns["new2"].a.Conn); return p })
	// heard was heard from before the others' bytes came.
	admit("new3")
	closed("heard", "gone", "silent", "new1")
}
