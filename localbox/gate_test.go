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

// gateSteps admits named connections to g and checks which are closed.
type gateSteps struct {
	t     *testing.T
	g     *gate
	names []string
	conns map[string]*fakeConn
}

func (s *gateSteps) admit(name, ip string, closed ...string) *anonConn {
	s.t.Helper()
	c := &fakeConn{addr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 1))}
	s.names = append(s.names, name)
	s.conns[name] = c
	a := s.g.admit(c)
	var got []string
	for _, n := range s.names {
		if s.conns[n].closed {
			got = append(got, n)
		}
	}
	if !slices.Equal(got, closed) {
		s.t.Fatalf("after %s from %s: closed %v; want %v", name, ip, got, closed)
	}
	return a
}

// Past the cap of a source the gate closes that source's oldest
// anonymous connection; a mapped IPv4 address is that IPv4 address, and
// an IPv6 /64 one source.
func TestGatePerSource(t *testing.T) {
	s := &gateSteps{t: t, g: newGate(10, 2, time.Hour, nil), conns: map[string]*fakeConn{}}
	s.admit("a1", "192.0.2.1")
	s.admit("a2", "192.0.2.1")
	s.admit("a3", "::ffff:192.0.2.1", "a1")
	s.admit("v1", "2001:db8::1", "a1")
	s.admit("v2", "2001:db8::ffff:2", "a1")
	s.admit("v3", "2001:db8::3", "a1", "v1")
	s.admit("w1", "2001:db8:0:1::1", "a1", "v1")
}

// Past the cap in all the gate closes the oldest connection of the
// source that has the most, not the oldest of all, so a new client from
// a source of its own outlasts a flood from fewer sources; among sources
// as big, the oldest connection goes. An authenticated connection leaves
// the count (its read buffer comes then) and is never closed.
func TestGateInAll(t *testing.T) {
	s := &gateSteps{t: t, g: newGate(3, 3, time.Hour, nil), conns: map[string]*fakeConn{}}
	s.admit("b1", "192.0.2.2")
	s.admit("e1", "192.0.2.5")
	s.admit("e2", "192.0.2.5")
	c1 := s.admit("c1", "192.0.2.3", "e1")
	buffered := 0
	c1.onAuth = func() { buffered++ }
	c1.authenticated()
	c1.authenticated()
	if n := s.g.count(); n != 2 || buffered != 1 {
		t.Fatalf("after an authentication: %d anonymous, onAuth called %d times; want 2 and once", n, buffered)
	}
	s.admit("d1", "192.0.2.4", "e1")
	s.admit("f1", "192.0.2.6", "b1", "e1")
	s.admit("f2", "192.0.2.6", "b1", "e1", "f1")
}
