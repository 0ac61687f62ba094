package localbox

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"
)

// HTTP/2 framing (RFC 9113 section 4.1), as much as capConn needs.
const (
	frameHeaderLen  = 9
	frameHeaders    = 0x1
	frameRSTStream  = 0x3
	errCodeInternal = 0x2
	errCodeCancel   = 0x8
)

// rstFrame is an RST_STREAM frame for stream id with code.
func rstFrame(id, code uint32) []byte {
	b := make([]byte, frameHeaderLen+4)
	b[2] = 4
	b[3] = frameRSTStream
	binary.BigEndian.PutUint32(b[5:], id&0x7fffffff)
	binary.BigEndian.PutUint32(b[9:], code)
	return b
}

// capConn is the plaintext HTTP/2 connection of one client with a cap on
// how long each stream lives: when a stream the client opened is max old,
// it is reset both ways, as a load balancer ends a stream at its timeout
// (the hosted service's front end at one hour): the client is sent
// RST_STREAM INTERNAL_ERROR (gRPC's client reports INTERNAL "stream
// terminated by RST_STREAM"), and the server reads RST_STREAM CANCEL (the
// Exec's context ends, as when a client goes). Neither sees a status or a
// clean end. Frames of the stream that follow either way are passed on;
// both ends drop frames of a stream they have closed, and the connection's
// own flow control and header compression stay whole.
type capConn struct {
	net.Conn
	max time.Duration

	// in carries whole inbound frames (and the injected resets) to Read;
	// rest is what Read has not returned yet of the last one.
	in     chan []byte
	rest   []byte
	inErr  error
	closed chan struct{}
	once   sync.Once

	mu sync.Mutex // guards the outbound state and Write
	// hdr holds a partial outbound frame header; left is how much of the
	// current outbound frame's payload is still to be written.
	hdr  []byte
	left int
	// pending are resets to write at the next outbound frame boundary.
	pending [][]byte
	// seen are the streams the client opened, so each is capped once.
	seen   map[uint32]bool
	timers []*time.Timer
}

func newCapConn(c net.Conn, max time.Duration) *capConn {
	cc := &capConn{Conn: c, max: max, in: make(chan []byte, 16), closed: make(chan struct{}), seen: map[uint32]bool{}}
	go cc.readFrames()
	return cc
}

// readFrames reads the client's preface and then frame by frame, starting
// each new stream's timer at its first HEADERS.
func (c *capConn) readFrames() {
	defer close(c.in)
	preface := make([]byte, len(http2Preface))
	if _, err := io.ReadFull(c.Conn, preface); err != nil {
		c.inErr = err
		return
	}
	if !c.deliver(preface) {
		return
	}
	for {
		hdr := make([]byte, frameHeaderLen)
		if _, err := io.ReadFull(c.Conn, hdr); err != nil {
			c.inErr = err
			return
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		f := make([]byte, frameHeaderLen+n)
		copy(f, hdr)
		if _, err := io.ReadFull(c.Conn, f[frameHeaderLen:]); err != nil {
			c.inErr = err
			return
		}
		if id := binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff; hdr[3] == frameHeaders && id != 0 {
			c.mu.Lock()
			fresh := !c.seen[id]
			c.seen[id] = true
			c.mu.Unlock()
			if fresh {
				t := time.AfterFunc(c.max, func() { c.reset(id) })
				c.mu.Lock()
				c.timers = append(c.timers, t)
				c.mu.Unlock()
			}
		}
		if !c.deliver(f) {
			return
		}
	}
}

func (c *capConn) deliver(b []byte) bool {
	select {
	case c.in <- b:
		return true
	case <-c.closed:
		return false
	}
}

// reset ends stream id both ways. A stream that has ended since is
// reset again, which both ends ignore.
func (c *capConn) reset(id uint32) {
	c.deliver(rstFrame(id, errCodeCancel))
	c.mu.Lock()
	defer c.mu.Unlock()
	f := rstFrame(id, errCodeInternal)
	if c.left == 0 && len(c.hdr) == 0 {
		c.Conn.Write(f)
		return
	}
	c.pending = append(c.pending, f)
}

func (c *capConn) Read(p []byte) (int, error) {
	if len(c.rest) == 0 {
		b, ok := <-c.in
		if !ok {
			if c.inErr == nil {
				return 0, io.EOF
			}
			return 0, c.inErr
		}
		c.rest = b
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

// Write passes p on, with any pending reset put in at a frame boundary.
func (c *capConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := 0 // p[:start] is written
	flush := func(i int) error {
		if _, err := c.Conn.Write(p[start:i]); err != nil {
			return err
		}
		start = i
		for _, f := range c.pending {
			if _, err := c.Conn.Write(f); err != nil {
				return err
			}
		}
		c.pending = nil
		return nil
	}
	for i := 0; i < len(p); {
		if c.left == 0 && len(c.hdr) == 0 && len(c.pending) > 0 {
			if err := flush(i); err != nil {
				return start, err
			}
		}
		if c.left > 0 {
			k := min(c.left, len(p)-i)
			c.left -= k
			i += k
			continue
		}
		k := min(frameHeaderLen-len(c.hdr), len(p)-i)
		c.hdr = append(c.hdr, p[i:i+k]...)
		i += k
		if len(c.hdr) == frameHeaderLen {
			c.left = int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
			c.hdr = c.hdr[:0]
		}
	}
	if c.left == 0 && len(c.hdr) == 0 && len(c.pending) > 0 {
		if err := flush(len(p)); err != nil {
			return start, err
		}
	} else if start < len(p) {
		if _, err := c.Conn.Write(p[start:]); err != nil {
			return start, err
		}
	}
	return len(p), nil
}

func (c *capConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.mu.Lock()
		for _, t := range c.timers {
			t.Stop()
		}
		c.mu.Unlock()
	})
	return c.Conn.Close()
}
