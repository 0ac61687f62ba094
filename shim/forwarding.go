package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/halfclose"
	"github.com/cocoonbox/cocoonbox/relay"
)

// forwarder runs the -L and -D listeners of one run, each accepted
// connection one relay.Dial into the box, and the listeners in the box of
// -R and -A (remote.go).
type forwarder struct {
	r         *runner
	c         *box.Client
	ctx       context.Context
	cancel    context.CancelFunc
	listeners []net.Listener
	remotes   []*relay.Listener
	// conns counts the forwarded connections still open; listeners, the
	// accept loops.
	conns, loops sync.WaitGroup
	// lost has a value once a listener in the box ended by itself
	// (listenerLost).
	lost chan struct{}
}

// startForwards listens for every active forward. A forward that cannot
// listen is reported; with ExitOnForwardFailure it is an error, which
// closes the others.
func (r *runner) startForwards(c *box.Client) (*forwarder, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwarder{r: r, c: c, ctx: ctx, cancel: cancel, lost: make(chan struct{}, 1)}
	var remote []Forward
	for _, fw := range r.o.ActiveForwards() {
		if fw.Remote {
			remote = append(remote, fw)
			continue
		}
		ls, err := listen(fw, r.o.GatewayPorts)
		if err != nil {
			err = fmt.Errorf("%s: %w", flagOf(fw), err)
			if r.o.ExitOnForwardFailure {
				f.stop()
				return nil, err
			}
			r.logf(LogError, "%s: %v", r.env.Prog, err)
			continue
		}
		for _, l := range ls {
			if fw.Dynamic {
				r.debugf(LogDebug1, "Local connections to %s forwarded through a SOCKS server into box %s", l.Addr(), r.o.Box())
			} else {
				r.debugf(LogDebug1, "Local connections to %s forwarded to %s in box %s", l.Addr(), fw.connectString(), r.o.Box())
			}
			f.listeners = append(f.listeners, l)
			f.loops.Add(1)
			go f.accept(l, fw)
		}
	}
	if err := f.startRemote(remote); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

func flagOf(fw Forward) string {
	switch {
	case fw.Remote:
		return "-R " + fw.listenString()
	case fw.Dynamic:
		return "-D " + fw.listenString()
	}
	return "-L " + fw.listenString()
}

// listen opens fw's listening sockets as ssh's channel_setup_fwd_listener
// does: no bind address means loopback (127.0.0.1 and ::1), or every
// address with GatewayPorts; "*" or "" means every address; "localhost"
// loopback (relay.ListenPort: a socket for each family, one being enough).
func listen(fw Forward, gatewayPorts bool) ([]net.Listener, error) {
	if fw.ListenPath != "" {
		l, err := net.Listen("unix", fw.ListenPath)
		if err != nil {
			return nil, err
		}
		// As ssh's StreamLocalBindMask 0177: only the user may connect.
		if err := os.Chmod(fw.ListenPath, 0o600); err != nil {
			l.Close()
			return nil, err
		}
		return []net.Listener{l}, nil
	}
	host := fw.ListenHost
	switch {
	case !fw.Explicit && gatewayPorts:
		host = "*"
	case !fw.Explicit:
		host = "localhost"
	}
	return relay.ListenPort(host, strconv.Itoa(fw.ListenPort))
}

func (f *forwarder) accept(l net.Listener, fw Forward) {
	defer f.loops.Done()
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		f.conns.Add(1)
		go func() {
			defer f.conns.Done()
			defer conn.Close()
			f.handle(conn, fw)
		}()
	}
}

// handle forwards one accepted connection.
func (f *forwarder) handle(conn net.Conn, fw Forward) {
	boxName := f.r.o.Box()
	if fw.Dynamic {
		rc, err := socksConnect(conn, func(host string, port int) (relay.Conn, error) {
			return relay.Dial(f.ctx, f.c, boxName, host, uint32(port))
		})
		if err != nil {
			f.r.logf(LogInfo, "%s: %s: %v", f.r.env.Prog, flagOf(fw), err)
			return
		}
		splice(conn, rc)
		return
	}
	var rc relay.Conn
	var err error
	if fw.ConnectPath != "" {
		rc, err = relay.DialUnix(f.ctx, f.c, boxName, fw.ConnectPath)
	} else {
		rc, err = relay.Dial(f.ctx, f.c, boxName, fw.ConnectHost, uint32(fw.ConnectPort))
	}
	if err != nil {
		// As ssh's "channel N: open failed": the run goes on.
		f.r.logf(LogInfo, "%s: %s: %v", f.r.env.Prog, flagOf(fw), err)
		return
	}
	splice(conn, rc)
}

// splice copies a and b both ways; each EOF becomes the other side's
// half-close, and both are closed when both directions are done. A
// failed read of a (a reset: the client is gone, not half-closed) closes
// b at once, which ends the relay even if its target never answers: so
// not halfclose.Join, whose copies only half-close; and an a that cannot
// half-close is closed.
func splice(a net.Conn, b relay.Conn) {
	done := make(chan struct{})
	go func() {
		if _, err := io.Copy(b, a); err != nil && !errors.Is(err, net.ErrClosed) {
			b.Close()
		} else {
			b.CloseWrite()
		}
		close(done)
	}()
	io.Copy(a, b)
	if !halfclose.CloseWrite(a) {
		a.Close()
	}
	<-done
	b.Close()
}

// stop closes the listeners, here and in the box, at once; open
// connections go on.
func (f *forwarder) stop() {
	for _, l := range f.listeners {
		l.Close()
	}
	var wg sync.WaitGroup
	for _, l := range f.remotes {
		wg.Go(func() { l.Close() })
	}
	wg.Wait()
	f.loops.Wait()
}

// wait is ssh's ending after the session: no new connections, and the
// open ones run to their end.
func (f *forwarder) wait() {
	f.stop()
	f.conns.Wait()
	f.cancel()
}

// stdioForward is -W: stdin and stdout are one connection to host:port in
// the box. It returns 0 when the target has closed, 255 with one line if
// the connection cannot be made.
func (r *runner) stdioForward(c *box.Client) int {
	r.debugf(LogDebug1, "Stdio forwarding to %s:%d in box %s", r.o.StdioHost, r.o.StdioPort, r.o.Box())
	rc, err := relay.Dial(context.Background(), c, r.o.Box(), r.o.StdioHost, uint32(r.o.StdioPort))
	if err != nil {
		return r.fail(fmt.Errorf("stdio forwarding failed: %w", err))
	}
	defer rc.Close()
	r.markReady()
	if r.env.Stdin != nil && !r.o.StdinNull {
		go halfclose.Copy(rc, r.env.Stdin)
	} else {
		rc.CloseWrite()
	}
	if _, err := io.Copy(r.env.Stdout, rc); err != nil {
		if brokenPipe(err) {
			return ExitFailure
		}
		return r.fail(fmt.Errorf("stdio forwarding: %w", err))
	}
	return 0
}
