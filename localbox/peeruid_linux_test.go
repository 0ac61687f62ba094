package localbox

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
)

// peerUID finds the user of the connecting socket of a loopback
// connection, over IPv4 and IPv6 (and IPv4 to a listener of both), and
// nothing for an address no socket of this machine has.
func TestPeerUID(t *testing.T) {
	for _, tc := range []struct{ listen, dial string }{
		{"127.0.0.1:0", "127.0.0.1"},
		{"[::1]:0", "::1"},
		{"[::]:0", "127.0.0.1"},
	} {
		lis, err := net.Listen("tcp", tc.listen)
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		port := lis.Addr().(*net.TCPAddr).Port
		c, err := net.Dial("tcp", net.JoinHostPort(tc.dial, strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := lis.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		local := s.LocalAddr().(*net.TCPAddr).AddrPort()
		peer := s.RemoteAddr().(*net.TCPAddr).AddrPort()
		if uid, ok := peerUID(local, peer); !ok || uid != uint32(os.Getuid()) {
			t.Errorf("%s to %s: uid %d, %v; want %d", peer, local, uid, ok, os.Getuid())
		}
		if uid, ok := peerUID(local, netip.AddrPortFrom(peer.Addr(), peer.Port()+1)); ok {
			t.Errorf("a port no socket has: uid %d", uid)
		}
	}
}
