package relay

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/halfclose"
)

// DialTimeout bounds the box half's connect.
const DialTimeout = 30 * time.Second

// ConnectError is the box half's failure to connect; the agent exits
// ExitConnect with its message as the one stderr line.
type ConnectError struct {
	Addr string
	Err  error
}

func (e *ConnectError) Error() string { return "connect " + e.Addr + ": " + reason(e.Err) }
func (e *ConnectError) Unwrap() error { return e.Err }

// reason is the innermost message of a dial error: "connection refused"
// rather than "dial tcp 127.0.0.1:1: connect: connection refused".
func reason(err error) string {
	if oe, ok := err.(*net.OpError); ok && oe.Err != nil {
		err = oe.Err
		if se, ok := err.(interface{ Unwrap() error }); ok && se.Unwrap() != nil {
			err = se.Unwrap()
		}
	}
	return err.Error()
}

// Serve is the box half, `cocoonbox-agent relay`: it connects to
// host:port, writes Ready on out if ready is set, and copies in to the
// connection and the connection to out. EOF on in shuts down the
// connection's write side and the copy from it goes on; the end of the
// copy from the connection ends Serve, unless eof is not nil: then the
// connection's EOF is an eof line on eof ("eof N", EOFEnv), and Serve
// goes on until in's EOF has been passed on too (see pipe). A failed
// connect is a *ConnectError and nothing is written.
func Serve(ctx context.Context, host string, port uint32, in io.Reader, out io.Writer, ready bool, eof io.Writer) error {
	if err := CheckTarget(host, port); err != nil {
		return err
	}
	addr := net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
	d := net.Dialer{Timeout: DialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return &ConnectError{Addr: addr, Err: err}
	}
	return pipe(c, addr, in, out, ready, eof)
}

// pipe writes Ready on out if ready is set, then copies in to c and c to
// out (c is addr, for an error); in's EOF shuts down c's write side. c's
// EOF ends the copy, and with eof nil pipe: an Exec's stdout has no EOF
// but the Exec's end, which ends its stdin too. With eof, c's EOF is
// instead a line there, "eof N", N the bytes out got, Ready included
// (the laptop half ends its reads once it has them all, however stdout
// and stderr interleave), and pipe goes on until the copy of in has
// ended, as an SSH channel is half-closed one way at a time. It closes
// c.
func pipe(c net.Conn, addr string, in io.Reader, out io.Writer, ready bool, eof io.Writer) error {
	defer c.Close()
	var sent int64
	if ready {
		if _, err := out.Write([]byte{Ready}); err != nil {
			return err
		}
		sent++
	}
	up := make(chan struct{})
	go func() {
		halfclose.Copy(c, in)
		close(up)
	}()
	n, err := io.Copy(out, c)
	if err != nil {
		return fmt.Errorf("relay %s: %w", addr, err)
	}
	if eof == nil {
		return nil
	}
	if _, err := fmt.Fprintf(eof, "%s%d\n", eofPrefix, sent+n); err != nil {
		return err
	}
	<-up
	return nil
}
