// Package sshserve is an SSH-2 server for the user's own SSH client, run as
// its ProxyCommand: each session channel is one box command with the exec
// semantics of cocoonbox-ssh (DESIGN.md "Exec semantics: exactly ssh's"),
// and each direct-tcpip channel a byte stream from inside the box. The
// server runs on the client's own stdio, so it authenticates no one: it
// lets in any client authentication; the box authorizes with the cocoonbox
// token, as everywhere.
package sshserve

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/relay"
)

// Runner runs one command in a box and returns how it ended, as
// box.Client.Exec does: the error is non-nil only for a failure of the
// client or the transport.
type Runner interface {
	Exec(ctx context.Context, cmd *box.Command) (box.ExitStatus, error)
}

// Conn is a forwarded byte stream; CloseWrite sends EOF and keeps reading.
// relay.Conn is one.
type Conn interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// Server serves SSH connections for one box. Box, Runner and HostKey are
// required; every other field may be left zero.
type Server struct {
	// Box is the box every channel runs in.
	Box string
	// Runner runs the sessions' commands.
	Runner Runner
	// HostKey is the server's host key (see HostKey).
	HostKey ssh.Signer
	// Listen, if not nil, starts a listener in the box (relay.Listen): for
	// tcpip-forward and streamlocal-forward@openssh.com (ssh -R) and the
	// connection's agent, on auth-agent-req@openssh.com (ssh -A). Nil
	// refuses them.
	Listen func(ctx context.Context, spec relay.ListenSpec) (*relay.Listener, error)
	// Log, if not nil, receives one line for each request refused for a
	// reason the protocol cannot carry (a global request's or
	// auth-agent-req's failure has none): a remote forward the box could
	// not listen for, agent forwarding it could not start.
	Log io.Writer
	// Dial, if not nil, opens a direct-tcpip channel's stream to host:port
	// as seen from inside the box (ssh -L, -D, -W). Nil refuses them.
	Dial func(ctx context.Context, host string, port uint32) (Conn, error)
	// DialUnix, if not nil, opens a direct-streamlocal@openssh.com
	// channel's stream to the unix socket at path inside the box (ssh -L
	// PORT:/path/to.sock). Nil refuses them.
	DialUnix func(ctx context.Context, path string) (Conn, error)
	// Terminfo, if not nil, returns the compiled terminfo entry for a
	// pty-req's TERM, sent with the terminal; nil when there is none.
	Terminfo func(term string) []byte
	// Subsystem returns the command line that runs a subsystem in the box,
	// or an error (then the request fails). Nil knows sftp only, as
	// cocoonbox-ssh -s.
	Subsystem func(name string) (string, error)
	// Check, if not nil, vets a session's command line before it runs: an
	// error goes to the session's stderr, and the session ends with 255
	// (mosh's mosh-server, when UDP cannot reach the box: shim.MoshUDP).
	Check func(line string) error
	// Progress, if not nil, receives one line per phase when the box has
	// to be woken first.
	Progress io.Writer
	// Prog prefixes the lines of ours a session prints on its stderr, such
	// as "cocoonbox-ssh".
	Prog string
	// Version names this server in its version line, after
	// openSSHCompat: "SSH-2.0-OpenSSH_9.0 " + Version, such as
	// "cocoonbox_1.2", without white space; empty is "cocoonbox".
	Version string
	// Logf, if not nil, receives one line per connection, channel and
	// request event, for debugging.
	Logf func(format string, args ...any)
}

// Serve runs one SSH connection on conn until the client ends it, then
// closes conn. It returns nil once a connection has been made, and the
// reason when the handshake failed.
func (s *Server) Serve(conn net.Conn) error {
	defer conn.Close()
	// The client is the user's own process on the other end of our stdio:
	// there is no one to tell apart, and the box checks the cocoonbox token
	// itself. So every method lets the client in, whatever it offers:
	// OpenSSH asks with "none" first, but Paramiko's SSHClient.connect
	// starts with a key from ~/.ssh, or a password, and would be hung up
	// on if only "none" were accepted.
	cfg := &ssh.ServerConfig{
		NoClientAuth:      true,
		PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil },
		PasswordCallback:  func(ssh.ConnMetadata, []byte) (*ssh.Permissions, error) { return nil, nil },
		KeyboardInteractiveCallback: func(ssh.ConnMetadata, ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
			return nil, nil
		},
		ServerVersion: "SSH-2.0-" + openSSHCompat + " " + s.version(),
		Config:        ssh.Config{Ciphers: ciphers()},
	}
	cfg.AddHostKey(s.HostKey)
	sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return fmt.Errorf("ssh handshake: %w", err)
	}
	s.logf("connection from %s, client %q", sc.User(), sc.ClientVersion())
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancel := func() { cancelCause(nil) }
	defer cancel()

	c := &connState{s: s, ctx: ctx, sc: sc, settle: make(chan chan struct{}), globalsDone: make(chan struct{})}
	wg := &c.wg
	wg.Go(func() { c.globalRequests(reqs) })
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			if c.noMoreSessions() {
				nc.Reject(ssh.Prohibited, "no-more-sessions was sent")
				continue
			}
			ch, creqs, err := nc.Accept()
			if err != nil {
				continue
			}
			wg.Go(func() { c.session(ch, creqs) })
		case "direct-tcpip":
			wg.Go(func() { s.directTCPIP(ctx, nc) })
		case "direct-streamlocal@openssh.com":
			wg.Go(func() { s.directStreamlocal(ctx, nc) })
		default:
			nc.Reject(ssh.UnknownChannelType, "unknown channel type "+nc.ChannelType())
		}
	}
	// The connection is gone: end every command still running, and every
	// listener; a resumable terminal session stays in the box to be taken
	// back (the client died, or its terminal was closed).
	cancelCause(box.ErrDetached)
	sc.Close()
	c.closeForwards()
	wg.Wait()
	// However the connection ended (the client's disconnect message, EOF,
	// a broken pipe), the client knows and says so itself.
	s.logf("connection closed: %v", sc.Wait())
	return nil
}

// openSSHCompat is the software part of the server's version line, the
// OpenSSH release whose behaviour a client may expect; our own name follows
// as the comment (RFC 4253 section 4.2). Clients choose OpenSSH's
// extensions and quirks by that word: OpenSSH's ssh sends eow@openssh.com
// (its stdout has closed) and no-more-sessions@openssh.com only to a
// version starting with "OpenSSH", and asyncssh's SFTP client puts
// SYMLINK's arguments in OpenSSH's order only when the line says OpenSSH;
// the sftp server behind the subsystem is OpenSSH's. 9.0 claims no quirk
// of an older release (OpenSSH's compat table, Paramiko's 7.7 check).
const openSSHCompat = "OpenSSH_9.0"

func (s *Server) version() string {
	if s.Version != "" {
		return s.Version
	}
	return "cocoonbox"
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// warnf writes one line to Log, after the program's name.
func (s *Server) warnf(format string, args ...any) {
	s.logf(format, args...)
	if s.Log != nil {
		fmt.Fprintf(s.Log, "%s: %s\r\n", s.prog(), fmt.Sprintf(format, args...))
	}
}

// connState is what one connection remembers across its channels.
type connState struct {
	s *Server
	// ctx ends with the connection; sc is the connection, for the channels
	// the server opens; wg counts the goroutines that serve it.
	ctx context.Context
	sc  *ssh.ServerConn
	wg  sync.WaitGroup

	// settle asks globalRequests to answer every global request already
	// received (settled); globalsDone is closed when it has returned.
	settle      chan chan struct{}
	globalsDone chan struct{}

	mu     sync.Mutex
	noMore bool // no-more-sessions@openssh.com was received
	// sessions is how many session channels were opened.
	sessions int
	// forwards are the listeners of ssh -R; nil once closeForwards ran.
	forwards map[remoteForward]*relay.Listener
	// agent is the listener of ssh -A (agentForward), set under mu;
	// agentMu is held while it is being made.
	agent   *relay.Listener
	agentMu sync.Mutex
	ended   bool
}

// noMoreSessions reports whether a session channel is refused, and counts
// the ones that are not. OpenSSH's ssh opens its session and then sends
// no-more-sessions@openssh.com; x/crypto/ssh hands channels and global
// requests over on two Go channels, which lose that order. So the request
// refuses every session after the connection's first: it is sent by a
// client that opens one session (ssh without ControlMaster), or none (-N).
func (c *connState) noMoreSessions() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noMore && c.sessions > 0 {
		return true
	}
	c.sessions++
	return false
}

// globalRequests answers the connection's global requests, one at a
// time, as their replies must come in order: remote forwarding; and
// OpenSSH's keepalive (ServerAliveInterval) and anything unknown get a
// failure reply, which is all a keepalive asks for, as sshd answers it.
func (c *connState) globalRequests(reqs <-chan *ssh.Request) {
	defer close(c.globalsDone)
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				return
			}
			c.globalRequest(r)
		case done := <-c.settle:
			for len(reqs) > 0 {
				if r, ok := <-reqs; ok {
					c.globalRequest(r)
				}
			}
			close(done)
		}
	}
}

// settled returns once every global request received before it was
// called has been answered. x/crypto/ssh hands global requests and a
// channel's requests over on Go channels of their own, which lose the
// order they came in; but it queues each global request before it reads
// the next packet, so one the client sent before a session's request is
// in the queue, or being answered, when the session's request is read.
// sshd answers each message in turn: a remote forward OpenSSH asked for
// before its session is answered (and its listener there) before the
// session's command starts, and so before its exit status; ssh -f and
// ExitOnForwardFailure rely on it.
func (c *connState) settled() {
	done := make(chan struct{})
	select {
	case c.settle <- done:
		<-done
	case <-c.globalsDone:
	}
}

// globalRequest answers one global request.
func (c *connState) globalRequest(r *ssh.Request) {
	c.s.logf("global request %s", r.Type)
	switch r.Type {
	case "no-more-sessions@openssh.com":
		c.mu.Lock()
		c.noMore = true
		c.mu.Unlock()
	case "tcpip-forward", "cancel-tcpip-forward", "streamlocal-forward@openssh.com", "cancel-streamlocal-forward@openssh.com":
		c.remoteForward(r)
		return
	}
	if r.WantReply {
		r.Reply(false, nil)
	}
}
