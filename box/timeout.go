package box

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc/credentials"

	"github.com/cocoonbox/cocoonbox/internal/rawio"
)

// timeoutCreds wraps transport credentials so that the connection they
// hand to gRPC keeps its first timed-out read or write. When the kernel
// gives up on a frozen link (gRPC sets TCP_USER_TIMEOUT to the keepalive's
// timeout), the write fails with "connection timed out" but gRPC may report
// the reader's "EOF" that follows; the kept error lets wrap name the real
// cause instead of suggesting the server is down.
type timeoutCreds struct {
	credentials.TransportCredentials
	last *atomic.Pointer[error]
}

func (c timeoutCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	// Under TLS or not, the socket's reads and writes need not wake the
	// runtime's sysmon (internal/rawio); gRPC has set its options on it.
	nc, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, rawio.Conn(conn))
	c.last.Store(nil)
	if err != nil {
		return nc, info, err
	}
	return &timeoutConn{Conn: nc, last: c.last}, info, nil
}

func (c timeoutCreds) Clone() credentials.TransportCredentials {
	return timeoutCreds{c.TransportCredentials.Clone(), c.last}
}

type timeoutConn struct {
	net.Conn
	last *atomic.Pointer[error]
}

func (c *timeoutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.keep(err)
	return n, err
}

func (c *timeoutConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.keep(err)
	return n, err
}

func (c *timeoutConn) keep(err error) {
	if err != nil && errors.Is(err, syscall.ETIMEDOUT) {
		c.last.CompareAndSwap(nil, &err)
	}
}
