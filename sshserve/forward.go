package sshserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/cocoonbox/cocoonbox/relay"
)

// directTCPIPReq is a direct-tcpip channel's payload (RFC 4254 section 7.2).
type directTCPIPReq struct {
	Host     string
	Port     uint32
	OrigHost string
	OrigPort uint32
}

// directTCPIP connects a direct-tcpip channel to its host and port inside
// the box through Dial, and copies both ways, each EOF passed on as a
// half-close, until both directions are done, the client closes the
// channel, or the connection ends: then the relay is closed (its Exec
// cancelled), even when the target never answers.
func (s *Server) directTCPIP(ctx context.Context, nc ssh.NewChannel) {
	var m directTCPIPReq
	if err := ssh.Unmarshal(nc.ExtraData(), &m); err != nil {
		nc.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	if s.Dial == nil {
		nc.Reject(ssh.Prohibited, "port forwarding is not available for this box")
		return
	}
	s.logf("direct-tcpip to %s:%d", m.Host, m.Port)
	conn, err := s.Dial(ctx, m.Host, m.Port)
	if err != nil {
		nc.Reject(ssh.ConnectionFailed, dialReason(s.Box, m.Host, m.Port, err))
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		conn.Close()
		return
	}
	// The requests' channel closes when the channel does: the client's
	// CLOSE (it wants no more bytes), or the end of the connection. Its
	// EOF is only the half-close the copy below passes on.
	closed := make(chan struct{})
	go func() {
		ssh.DiscardRequests(reqs)
		close(closed)
	}()
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(conn, ch)
		conn.CloseWrite()
	})
	wg.Go(func() {
		io.Copy(ch, conn)
		ch.CloseWrite()
	})
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-closed:
	case <-ctx.Done():
	}
	conn.Close()
	ch.Close()
	<-done
}

// dialReason is a failed connect's reason in a channel open failure: a
// relay.DialError already names the target and the box, so ssh's
// "connect failed: ..." says each once.
func dialReason(box, host string, port uint32, err error) string {
	if de, ok := errors.AsType[*relay.DialError](err); ok {
		return de.Error()
	}
	return fmt.Sprintf("connect to %s in box %s: %v", net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10)), box, err)
}
