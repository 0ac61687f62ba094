package sshserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cocoonbox/cocoonbox/internal/halfclose"
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
// the box through Dial, and forwards it. The relay is closed (its Exec
// cancelled) when the channel or the connection ends, even when the
// target never answers.
func (s *Server) directTCPIP(ctx context.Context, nc ssh.NewChannel) {
	var m directTCPIPReq
	if !direct(nc, "direct-tcpip", &m, s.Dial != nil, "port forwarding") {
		return
	}
	s.logf("direct-tcpip to %s:%d", m.Host, m.Port)
	conn, err := s.Dial(ctx, m.Host, m.Port)
	s.forwardTo(ctx, nc, conn, err, net.JoinHostPort(m.Host, strconv.FormatUint(uint64(m.Port), 10)))
}

// directStreamlocalReq is a direct-streamlocal@openssh.com channel's
// payload (OpenSSH's PROTOCOL, section 2.4).
type directStreamlocalReq struct {
	Path      string
	Reserved  string
	Reserved2 uint32
}

// directStreamlocal connects a direct-streamlocal@openssh.com channel
// (ssh -L PORT:/path/to.sock, -W /path/to.sock) to the unix socket at its
// path inside the box through DialUnix, as directTCPIP does to a port.
func (s *Server) directStreamlocal(ctx context.Context, nc ssh.NewChannel) {
	var m directStreamlocalReq
	if !direct(nc, "direct-streamlocal", &m, s.DialUnix != nil, "unix socket forwarding") {
		return
	}
	s.logf("direct-streamlocal to %s", m.Path)
	conn, err := s.DialUnix(ctx, m.Path)
	s.forwardTo(ctx, nc, conn, err, m.Path)
}

// direct decodes the payload of nc, a channel of type what, into m, and
// reports whether it may be connected: a payload that does not decode,
// or a forward the Server has no dialer for (can is false; feature
// names it), is refused.
func direct(nc ssh.NewChannel, what string, m any, can bool, feature string) bool {
	if err := ssh.Unmarshal(nc.ExtraData(), m); err != nil {
		nc.Reject(ssh.ConnectionFailed, "bad "+what+" request")
		return false
	}
	if !can {
		nc.Reject(ssh.Prohibited, feature+" is not available for this box")
		return false
	}
	return true
}

// forwardTo forwards nc to conn, or refuses nc with err, the dial's
// failure to reach target.
func (s *Server) forwardTo(ctx context.Context, nc ssh.NewChannel, conn Conn, err error, target string) {
	if err != nil {
		nc.Reject(ssh.ConnectionFailed, dialReason(s.Box, target, err))
		return
	}
	forward(ctx, nc, conn)
}

// forward accepts nc and copies between it and conn, each EOF passed on
// as a half-close, until both directions are done, the client closes the
// channel, or the connection ends: then conn is closed.
func forward(ctx context.Context, nc ssh.NewChannel, conn Conn) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		conn.Close()
		return
	}
	join(ctx, ch, reqs, conn)
}

// drainGrace bounds how long a channel the client has closed waits for
// the box to take the bytes the client sent before.
const drainGrace = 5 * time.Second

// join copies between ch, an open channel with its requests reqs, and
// conn, as forward does.
func join(ctx context.Context, ch ssh.Channel, reqs <-chan *ssh.Request, conn Conn) {
	// The requests' channel closes when the channel does: the client's
	// CLOSE (it wants no more bytes), or the end of the connection. Its
	// EOF is only the half-close the copies below pass on.
	closed := make(chan struct{})
	go func() {
		ssh.DiscardRequests(reqs)
		close(closed)
	}()
	up, down := make(chan struct{}), make(chan struct{})
	go func() {
		halfclose.Copy(conn, ch)
		close(up)
	}()
	go func() {
		halfclose.Copy(ch, conn)
		close(down)
	}()
	select {
	case <-up:
		select {
		case <-down:
		case <-closed:
		case <-ctx.Done():
		}
	case <-closed:
		// What the client sent before its CLOSE still goes to conn (the
		// channel's reads end at EOF), as sshd drains a channel's output
		// before it closes it: OpenSSH sends its last bytes, EOF and
		// CLOSE together once its socket has closed. A box that does not
		// take them within drainGrace is cut off.
		select {
		case <-up:
		case <-time.After(drainGrace):
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	conn.Close()
	ch.Close()
	<-up
	<-down
}

// dialReason is a failed connect's reason in a channel open failure: a
// relay.DialError already names the target and the box, so ssh's
// "connect failed: ..." says each once.
func dialReason(box, addr string, err error) string {
	if de, ok := errors.AsType[*relay.DialError](err); ok {
		return de.Error()
	}
	return fmt.Sprintf("connect to %s in box %s: %v", addr, box, err)
}
