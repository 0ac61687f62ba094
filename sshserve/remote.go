package sshserve

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/cocoonbox/cocoonbox/relay"
)

// The payloads of remote forwarding (RFC 4254 section 7; OpenSSH's
// PROTOCOL, sections 2.4 and 2.5, and PROTOCOL.agent).
type (
	tcpipForwardReq struct {
		Addr string
		Port uint32
	}
	tcpipForwardReply struct{ Port uint32 }
	forwardedTCPIP    struct {
		Addr     string
		Port     uint32
		OrigAddr string
		OrigPort uint32
	}
	streamlocalForwardReq struct{ Path string }
	forwardedStreamlocal  struct {
		Path     string
		Reserved string
	}
)

// remoteForward is one listener a tcpip-forward or streamlocal-forward
// asked for, by what its cancel names: the address as the client sent
// it and the port listened on, or the socket path.
type remoteForward struct {
	addr string
	port uint32
	path string
}

// remoteForward answers tcpip-forward, streamlocal-forward@openssh.com
// and their cancels (ssh -R): a listener in the box through Listen, each
// connection it accepts a forwarded-tcpip or
// forwarded-streamlocal@openssh.com channel to the client. The reply to
// a tcpip-forward for port 0 carries the port the box chose. A listener
// the box could not make is a failure reply, which is all the protocol
// says; the reason goes to Log.
func (c *connState) remoteForward(r *ssh.Request) {
	reply := func(ok bool, payload []byte) {
		if r.WantReply {
			r.Reply(ok, payload)
		}
	}
	s := c.s
	var key remoteForward
	var spec relay.ListenSpec
	switch r.Type {
	case "tcpip-forward", "cancel-tcpip-forward":
		var m tcpipForwardReq
		if ssh.Unmarshal(r.Payload, &m) != nil {
			reply(false, nil)
			return
		}
		key = remoteForward{addr: m.Addr, port: m.Port}
		spec = relay.ListenSpec{Mode: relay.ListenTCP, Host: m.Addr, Port: m.Port}
	default:
		var m streamlocalForwardReq
		if ssh.Unmarshal(r.Payload, &m) != nil {
			reply(false, nil)
			return
		}
		key = remoteForward{path: m.Path}
		spec = relay.ListenSpec{Mode: relay.ListenUnix, Path: m.Path}
	}
	if r.Type == "cancel-tcpip-forward" || r.Type == "cancel-streamlocal-forward@openssh.com" {
		c.mu.Lock()
		l := c.forwards[key]
		delete(c.forwards, key)
		c.mu.Unlock()
		if l != nil {
			// Connections already forwarded go on, as with sshd.
			l.Close()
		}
		reply(l != nil, nil)
		return
	}
	if s.Listen == nil {
		s.warnf("remote forwarding of %s: not available for this box", spec)
		reply(false, nil)
		return
	}
	c.mu.Lock()
	_, dup := c.forwards[key]
	c.mu.Unlock()
	if dup {
		reply(false, nil)
		return
	}
	l, err := s.Listen(c.ctx, spec)
	if err != nil {
		s.warnf("remote forwarding: %v", err)
		reply(false, nil)
		return
	}
	key.port = l.Port()
	c.mu.Lock()
	ended := c.ended
	if !ended {
		if c.forwards == nil {
			c.forwards = map[remoteForward]*relay.Listener{}
		}
		c.forwards[key] = l
	}
	c.mu.Unlock()
	if ended {
		l.Close()
		reply(false, nil)
		return
	}
	s.logf("%s: listening on %s in the box", r.Type, spec)
	var payload []byte
	if r.Type == "tcpip-forward" && spec.Port == 0 {
		payload = ssh.Marshal(tcpipForwardReply{Port: l.Port()})
	}
	// The reply first: OpenSSH's client knows a port the box chose only
	// from it, and refuses a forwarded-tcpip for a port it does not know.
	reply(true, payload)
	c.wg.Go(func() {
		c.serveListener(l, func(a *relay.Accepted) (string, []byte) {
			if key.path != "" {
				return "forwarded-streamlocal@openssh.com", ssh.Marshal(forwardedStreamlocal{Path: key.path})
			}
			return "forwarded-tcpip", ssh.Marshal(forwardedTCPIP{Addr: key.addr, Port: key.port, OrigAddr: a.Host, OrigPort: a.Port})
		})
	})
}

// serveListener opens a channel to the client for each connection l
// accepts, named and described by open, and forwards it once the client
// has accepted the channel; a refused channel closes the connection in
// the box. It returns when l ends.
func (c *connState) serveListener(l *relay.Listener, open func(*relay.Accepted) (string, []byte)) {
	for {
		a, err := l.Accept()
		if err != nil {
			return
		}
		c.wg.Go(func() {
			typ, payload := open(a)
			ch, reqs, err := c.sc.OpenChannel(typ, payload)
			if err != nil {
				c.s.logf("%s from %s:%d: %v", typ, a.Host, a.Port, err)
				a.Reject()
				return
			}
			conn, err := a.Take(c.ctx)
			if err != nil {
				c.s.logf("%s: %v", typ, err)
				ch.Close()
				return
			}
			join(c.ctx, ch, reqs, conn)
		})
	}
}

// closeForwards ends the connection's listeners, at once and together.
func (c *connState) closeForwards() {
	c.mu.Lock()
	ls := c.forwards
	c.forwards, c.ended = nil, true
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() { l.Close() })
	}
	wg.Wait()
}

// agentForward starts a session's agent listener
// (auth-agent-req@openssh.com, ssh -A): a socket in the box, 0600 in a
// 0700 directory of the box user's, each connection to it an
// auth-agent@openssh.com channel to the client. The listener's Path is
// the session's SSH_AUTH_SOCK; the caller closes it when the session
// ends.
func (c *connState) agentForward(ctx context.Context) (*relay.Listener, error) {
	if c.s.Listen == nil {
		return nil, fmt.Errorf("agent forwarding is not available for this box")
	}
	l, err := c.s.Listen(ctx, relay.ListenSpec{Mode: relay.ListenAgent})
	if err != nil {
		return nil, err
	}
	c.wg.Go(func() {
		c.serveListener(l, func(*relay.Accepted) (string, []byte) { return "auth-agent@openssh.com", nil })
	})
	return l, nil
}
