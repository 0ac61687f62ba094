package localbox

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/cork"
)

// http2Preface is what every HTTP/2 connection with prior knowledge, and
// so every plaintext gRPC connection, sends first (RFC 9113 section 3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// sniffTimeout bounds how long a new connection may take to send the bytes
// that tell HTTP/2 from HTTP/1.
const sniffTimeout = 10 * time.Second

// sniffer splits one listener in two by the first bytes of each connection:
// the HTTP/2 preface goes to grpc (served by grpc.Server.Serve, its fast
// path), anything else to http (the sign-in pages). Sniffing happens in
// each connection's own goroutine, so a slow client holds up no other.
type sniffer struct {
	lis  net.Listener
	tls  *tls.Config // if not nil, every connection is TLS (tls.go)
	gate *gate
	grpc *subListener
	http *subListener

	once sync.Once
	done chan struct{}
}

func newSniffer(lis net.Listener, tc *tls.Config, g *gate) *sniffer {
	m := &sniffer{lis: lis, tls: tc, gate: g, done: make(chan struct{})}
	m.grpc = &subListener{m: m, conns: make(chan net.Conn)}
	m.http = &subListener{m: m, conns: make(chan net.Conn)}
	return m
}

// serve accepts until the listener is closed.
func (m *sniffer) serve() {
	var delay time.Duration
	for {
		c, err := m.lis.Accept()
		if err != nil {
			if ne, ok := err.(interface{ Temporary() bool }); ok && ne.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(delay):
					continue
				case <-m.done:
				}
			}
			m.close()
			return
		}
		delay = 0
		if m.gate == nil {
			go m.sniff(c, nil)
			continue
		}
		a := m.gate.admit(c)
		go m.sniff(a, a)
	}
}

// sniff tells c's kind; a is the gate's record of it, nil without a gate
// (a unix socket).
func (m *sniffer) sniff(c net.Conn, a *anonConn) {
	if m.tls != nil {
		// The read buffer comes once a call carries a valid token.
		raw := cork.RawUnbuffered(c)
		a.onAuth = raw.Buffer
		tc := tls.Server(raw, m.tls)
		c.SetDeadline(time.Now().Add(sniffTimeout))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return
		}
		c.SetDeadline(time.Time{})
		switch tc.ConnectionState().NegotiatedProtocol {
		case "h2":
			m.deliver(m.grpc, &gateConn{cork.Wrap(tc, raw), a})
			return
		case "http/1.1":
			// net/http sets Request.TLS only for a *tls.Conn.
			m.deliver(m.http, tc)
			return
		}
		c = cork.Wrap(tc, raw)
	}
	c.SetReadDeadline(time.Now().Add(sniffTimeout))
	buf := make([]byte, len(http2Preface))
	n := 0
	for n < len(buf) && bytes.HasPrefix([]byte(http2Preface), buf[:n]) {
		k, err := c.Read(buf[n:])
		n += k
		if err != nil {
			c.Close()
			return
		}
	}
	c.SetReadDeadline(time.Time{})
	c = &prefixConn{Conn: c, prefix: buf[:n]}
	if string(buf[:n]) == http2Preface {
		m.deliver(m.grpc, &gateConn{c, a})
		return
	}
	m.deliver(m.http, c)
}

// deliver hands c to one side, or closes it when the sniffer is closed.
func (m *sniffer) deliver(to *subListener, c net.Conn) {
	select {
	case to.conns <- c:
	case <-m.done:
		c.Close()
	}
}

func (m *sniffer) close() error {
	err := net.ErrClosed
	m.once.Do(func() {
		close(m.done)
		err = m.lis.Close()
	})
	return err
}

// subListener is one side of a sniffer. Closing it closes the whole
// sniffer.
type subListener struct {
	m     *sniffer
	conns chan net.Conn
}

func (l *subListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.m.done:
		return nil, net.ErrClosed
	}
}

func (l *subListener) Close() error {
	if err := l.m.close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

func (l *subListener) Addr() net.Addr { return l.m.lis.Addr() }

// prefixConn gives back the sniffed bytes before reading on.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
