package sshserve

import (
	"errors"
	"fmt"
	"io"
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
	listened := spec
	listened.Port = key.port
	c.wg.Go(func() {
		c.serveListener(l, "remote forwarding of "+listened.String(), func(a *relay.Accepted) (string, []byte) {
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
// the box. It returns when l ends. A listener that ends by itself (the
// box hibernated or went away, its process was killed), not closed by a
// cancel or the connection's end, ends the connection after one line on
// Log naming what (as "remote forwarding of localhost:8080"): as with
// sshd, a connection lives no longer than its forwards, so ssh -N -R
// exits 255 rather than forwarding nothing, and whatever restarts it
// listens again.
func (c *connState) serveListener(l *relay.Listener, what string, open func(*relay.Accepted) (string, []byte)) {
	for {
		a, err := l.Accept()
		if err != nil {
			if errors.Is(err, relay.ErrListenerClosed) || c.ctx.Err() != nil {
				return
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("the listener exited")
			}
			c.s.warnf("%s in box %s ended: %v", what, c.s.Box, err)
			c.sc.Close()
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

// closeForwards ends the connection's listeners (its remote forwards'
// and its agent's), at once and together.
func (c *connState) closeForwards() {
	c.mu.Lock()
	ls := c.forwards
	agent := c.agent
	c.forwards, c.agent, c.ended = nil, nil, true
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() { l.Close() })
	}
	if agent != nil {
		wg.Go(func() { agent.Close() })
	}
	wg.Wait()
}

// agentForward starts the connection's agent listener
// (auth-agent-req@openssh.com, ssh -A), unless it has one: a socket in
// the box, 0600 in a 0700 directory of the box user's, each connection
// to it an auth-agent@openssh.com channel to the client. As sshd's, it
// is the connection's, not the session's: every session that starts
// after it gets SSH_AUTH_SOCK naming it (agentSocket), and it ends with
// the connection (closeForwards).
func (c *connState) agentForward() error {
	c.agentMu.Lock()
	defer c.agentMu.Unlock()
	if c.agent != nil {
		return nil
	}
	if c.s.Listen == nil {
		return fmt.Errorf("agent forwarding is not available for this box")
	}
	l, err := c.s.Listen(c.ctx, relay.ListenSpec{Mode: relay.ListenAgent})
	if err != nil {
		return err
	}
	c.mu.Lock()
	ended := c.ended
	if !ended {
		c.agent = l
	}
	c.mu.Unlock()
	if ended {
		l.Close()
		return fmt.Errorf("the connection has ended")
	}
	c.wg.Go(func() {
		c.serveListener(l, "agent forwarding", func(*relay.Accepted) (string, []byte) { return "auth-agent@openssh.com", nil })
	})
	return nil
}

// agentSocket is the path of the connection's agent socket in the box,
// for a session's SSH_AUTH_SOCK; empty without one.
func (c *connState) agentSocket() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.agent == nil {
		return ""
	}
	return c.agent.Path()
}
