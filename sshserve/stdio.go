package sshserve

import (
	"errors"
	"io"
	"net"
	"os"
	"time"
)

// StdioConn makes a net.Conn of a process's standard input and output, for
// Serve under a ProxyCommand: reads come from in, writes go to out, and
// Close closes both when they are io.Closers. Deadlines are not supported.
func StdioConn(in io.Reader, out io.Writer) net.Conn {
	return &stdioConn{in: in, out: out}
}

type stdioConn struct {
	in  io.Reader
	out io.Writer
}

func (c *stdioConn) Read(p []byte) (int, error)  { return c.in.Read(p) }
func (c *stdioConn) Write(p []byte) (int, error) { return c.out.Write(p) }

func (c *stdioConn) Close() error {
	var errs []error
	if cl, ok := c.out.(io.Closer); ok {
		errs = append(errs, cl.Close())
	}
	if cl, ok := c.in.(io.Closer); ok {
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
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
