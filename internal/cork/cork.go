// Package cork batches the system calls of a TLS connection, as TCP_CORK
// batches segments in the kernel. crypto/tls writes each record of at most
// 16 KiB with its own write(2) and reads the socket about a record at a
// time; under gRPC, whose writer flushes up to 256 KiB at once, that is
// some 65,000 calls each way per GiB, and as many wake-ups of the peer.
// With Raw under the tls.Conn and Wrap over it, one Write of the tls.Conn
// is one write(2), and one read(2) takes whatever the socket holds, up to
// the read buffer (docs/benchmarks.md, "At real round trips").
package cork

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
)

// readSize is the read buffer under TLS, in bytes: a few records, and as
// much as a loopback socket hands over at once.
const readSize = 256 << 10

// flushSize is the most a corked write holds before writing, in bytes.
const flushSize = 256 << 10

// RawConn is the connection under TLS: reads are buffered, and writes are
// held while a Write of the Conn over it runs. Make it with Raw or
// RawUnbuffered.
type RawConn struct {
	net.Conn
	r atomic.Pointer[bufio.Reader] // nil: reads go straight to Conn

	mu     sync.Mutex
	corked bool
	buf    []byte
	// err is the first write's error, which every later write returns:
	// a record after a lost or torn one would reach the peer as garbage,
	// and the uncork's error does not reach crypto/tls, which would
	// otherwise keep it (as it keeps its own).
	err error
}

// Raw wraps c, the connection a tls.Client or tls.Server is made over.
func Raw(c net.Conn) *RawConn {
	r := RawUnbuffered(c)
	r.Buffer()
	return r
}

// RawUnbuffered is Raw with reads that go straight to c until Buffer is
// called, so that a server holds no read buffer for a connection it may
// never let in.
func RawUnbuffered(c net.Conn) *RawConn { return &RawConn{Conn: c} }

// Buffer makes the reads after any under way go through the read buffer.
func (c *RawConn) Buffer() {
	if c.r.Load() == nil {
		c.r.CompareAndSwap(nil, bufio.NewReaderSize(c.Conn, readSize))
	}
}

// Read reads from the buffer, or with one read(2) into it when empty.
func (c *RawConn) Read(p []byte) (int, error) {
	if r := c.r.Load(); r != nil {
		return r.Read(p)
	}
	return c.Conn.Read(p)
}

// Write writes p, or while corked appends it to what the uncork writes.
// A held write's error is the uncork's. After an error every write
// fails with it.
func (c *RawConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if !c.corked {
		n, err := c.Conn.Write(p)
		c.err = err
		return n, err
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= flushSize {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (c *RawConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was held and stops holding.
func (c *RawConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *RawConn) flushLocked() error {
	if c.err != nil {
		c.buf = c.buf[:0]
		return c.err
	}
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.err = err
	if cap(c.buf) > 2*flushSize {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// Conn is a TLS connection over a RawConn, whose every Write reaches the
// socket in one write(2). Make it with Wrap.
type Conn struct {
	net.Conn
	raw *RawConn
	mu  sync.Mutex
	// active is twice the number of Writes under way, plus 1 once Close
	// was called (crypto/tls's interlock of Write and Close).
	active atomic.Int32
}

// Wrap wraps tc, a TLS connection (or a wrapper of one) made over raw.
func Wrap(tc net.Conn, raw *RawConn) *Conn {
	return &Conn{Conn: tc, raw: raw}
}

// Write writes p through TLS, its records held and written at once.
func (c *Conn) Write(p []byte) (int, error) {
	for {
		x := c.active.Load()
		if x&1 != 0 {
			return 0, net.ErrClosed
		}
		if c.active.CompareAndSwap(x, x+2) {
			break
		}
	}
	defer c.active.Add(-2)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw.cork()
	n, err := c.Conn.Write(p)
	if ferr := c.raw.uncork(); err == nil && ferr != nil {
		return 0, ferr
	}
	return n, err
}

// Close closes the connection. While a Write is under way it closes the
// socket under TLS at once, without close_notify, as crypto/tls does for
// its own Write: the Write may be blocked writing what it held, outside
// tls.Conn.Write, and close_notify would wait behind it (up to the 5 s
// crypto/tls allows it) while net.Conn's Close must unblock it.
func (c *Conn) Close() error {
	var x int32
	for {
		x = c.active.Load()
		if x&1 != 0 {
			return net.ErrClosed
		}
		if c.active.CompareAndSwap(x, x|1) {
			break
		}
	}
	if x != 0 {
		return c.raw.Conn.Close()
	}
	return c.Conn.Close()
}
