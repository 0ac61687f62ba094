package localbox

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// fakeConn is an accepted connection from addr that notes its Close.
type fakeConn struct {
	net.Conn
	addr   net.Addr
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.addr }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

// Past a cap the gate closes the oldest anonymous connection of the
// source, or of all, and never the new one or an authenticated one.
func TestGateEvictsOldest(t *testing.T) {
	g := newGate(3, 2, time.Hour, nil)
	from := func(ip string) *fakeConn {
		return &fakeConn{addr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 1))}
	}
	c := map[string]*fakeConn{}
	admit := func(name, ip string) *anonConn {
		c[name] = from(ip)
		return g.admit(c[name])
	}
	closed := func() (out []string) {
		for _, n := range []string{"a1", "a2", "a3", "b1", "c1", "d1", "v6a", "v6b", "v6c"} {
			if c[n] != nil && c[n].closed {
				out = append(out, n)
			}
		}
		return out
	}
	want := func(step string, names ...string) {
		t.Helper()
		if got := closed(); !slices.Equal(got, names) {
			t.Fatalf("after %s: closed %v; want %v", step, got, names)
		}
	}
	admit("a1", "192.0.2.1")
	admit("a2", "192.0.2.1")
	a3 := admit("a3", "::ffff:192.0.2.1") // the same source, mapped
	want("a third from one source", "a1")
	admit("b1", "192.0.2.2")
	admit("c1", "192.0.2.3")
	want("a fourth in all", "a1", "a2")
	a3.authenticated()
	if n := g.count(); n != 2 {
		t.Fatalf("after an authentication: %d anonymous; want 2", n)
	}
	admit("d1", "192.0.2.4")
	want("a third in all after an authentication", "a1", "a2")
	admit("v6a", "2001:db8::1")
	want("a fourth in all", "a1", "a2", "b1")
	admit("v6b", "2001:db8::ffff:2") // the same /64
	want("a fourth in all", "a1", "a2", "b1", "c1")
	admit("v6c", "2001:db8::3")
	want("a third from one /64", "a1", "a2", "b1", "c1", "v6a")
	if c["a3"].closed || c["v6c"].closed {
		t.Error("an authenticated or the newest connection was closed")
	}
}
