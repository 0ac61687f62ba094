// Package loopback serves test connections: a listener whose every
// connection is handed to a func, in a goroutine of its own, and closed
// when the func returns. Tests use it for the targets of forwards and
// relays, and for sockets that answer wrong.
package loopback

import (
	"net"
	"testing"
)

// Serve listens on network and address ("tcp" and "127.0.0.1:0", or
// "unix" and a path) and serves each connection with serve until t ends,
// when the listener closes. A failure to listen fails t. It returns the
// listener, for its address.
func Serve(t testing.TB, network, address string, serve func(net.Conn)) net.Listener {
	t.Helper()
	l, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return l
}

// TCP is Serve on a free loopback TCP port; it returns the port's host
// and number.
func TCP(t testing.TB, serve func(net.Conn)) (host string, port uint32) {
	t.Helper()
	a := Serve(t, "tcp", "127.0.0.1:0", serve).Addr().(*net.TCPAddr)
	return a.IP.String(), uint32(a.Port)
}
