package sshserve

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// DirectMax is the size below which a StdioConn write with nothing
// queued before it goes out at once, in bytes: x/crypto/ssh's buffer
// size, so a packet smaller than it comes in one write, and a larger one
// in a first write of exactly this size and the rest, which writeLoop
// joins.
const DirectMax = 4096

// maxPending bounds what StdioConn holds of written data not yet passed
// on, and is the size of its read buffer, in bytes.
const maxPending = 256 << 10

// StdioConn makes a net.Conn of a process's standard input and output, for
// Serve under a ProxyCommand: reads come from in, writes go to out, and
// Close closes both when they are io.Closers. Deadlines are not supported.
//
// x/crypto/ssh writes each packet larger than its 4 KiB buffer in two
// writes (the buffer, then the rest) and reads it in two; on a pipe each
// is a system call here and a wake-up at the other end. So reads go
// through a large buffer, and a goroutine passes on, in one write,
// everything written since its last one: no delay while the reader keeps
// up, fewer and larger writes when it does not (each about a tenth less
// CPU for ssh and this process together on a 1 GiB transfer). A packet
// smaller than the buffer, with nothing queued before it, is written by
// Write itself: one request's answer then costs no hop to that goroutine
// (docs/benchmarks.md, "sftp requests through ssh --stdio"). Write
// returns once its bytes are written or queued, or with an earlier
// write's error; Close passes on what is queued first.
func StdioConn(in io.Reader, out io.Writer) net.Conn {
	c := &stdioConn{in: bufio.NewReaderSize(in, maxPending), rawIn: in, out: out, done: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.writeLoop()
	return c
}

type stdioConn struct {
	in    *bufio.Reader
	rawIn io.Reader
	out   io.Writer

	mu      sync.Mutex
	cond    *sync.Cond // broadcast when pending grows or drains, err is set, or closing
	pending []byte     // written, not yet passed on
	spare   []byte     // the buffer writeLoop last wrote from, for reuse
	err     error      // the first error writing to out
	writing bool       // a write to out is under way
	closing bool
	done    chan struct{} // closed when writeLoop has ended

	closeOnce sync.Once
	closeErr  error
}

func (c *stdioConn) Read(p []byte) (int, error) { return c.in.Read(p) }

func (c *stdioConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) >= maxPending && c.err == nil && !c.closing {
		c.cond.Wait()
	}
	switch {
	case c.err != nil:
		return 0, c.err
	case c.closing:
		return 0, net.ErrClosed
	}
	if len(p) < DirectMax && len(c.pending) == 0 && !c.writing {
		// A whole small packet, with nothing before it: written here, so
		// that a request's answer costs no hop to writeLoop.
		c.writing = true
		c.mu.Unlock()
		_, err := c.out.Write(p)
		c.mu.Lock()
		c.writing = false
		if err != nil {
			c.err = err
		}
		// writeLoop waits only for something queued meanwhile, an error or
		// Close: waking it for nothing on every packet cost a request more
		// than that write's time in scheduling delay (runtime/trace).
		if len(c.pending) > 0 || c.err != nil || c.closing {
			c.cond.Broadcast()
		}
		if err != nil {
			return 0, err
		}
		return len(p), nil
	}
	c.pending = append(c.pending, p...)
	c.cond.Broadcast()
	return len(p), nil
}

// writeLoop passes on what Write queued, until Close and the queue is
// empty, or a write fails.
func (c *stdioConn) writeLoop() {
	defer close(c.done)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for (len(c.pending) == 0 || c.writing) && !c.closing && c.err == nil {
			c.cond.Wait()
		}
		for c.writing {
			c.cond.Wait()
		}
		if len(c.pending) == 0 || c.err != nil {
			return
		}
		b := c.pending
		c.pending = c.spare[:0]
		c.writing = true
		c.mu.Unlock()
		_, err := c.out.Write(b)
		c.mu.Lock()
		c.writing = false
		c.spare = b
		c.cond.Broadcast()
		if err != nil {
			c.err = err
			return
		}
	}
}

func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.cond.Broadcast()
		c.mu.Unlock()
		<-c.done
		var errs []error
		if cl, ok := c.out.(io.Closer); ok {
			errs = append(errs, cl.Close())
		}
		if cl, ok := c.rawIn.(io.Closer); ok {
			errs = append(errs, cl.Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

func (c *stdioConn) LocalAddr() net.Addr  { return stdioAddr{} }
func (c *stdioConn) RemoteAddr() net.Addr { return stdioAddr{} }

func (c *stdioConn) SetDeadline(time.Time) error      { return os.ErrNoDeadline }
func (c *stdioConn) SetReadDeadline(time.Time) error  { return os.ErrNoDeadline }
func (c *stdioConn) SetWriteDeadline(time.Time) error { return os.ErrNoDeadline }

// stdioAddr is the address of either end of a StdioConn.
type stdioAddr struct{}

func (stdioAddr) Network() string { return "stdio" }
func (stdioAddr) String() string  { return "stdio" }
