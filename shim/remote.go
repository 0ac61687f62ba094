package shim

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/relay"
)

// localDialTimeout bounds a remote forward's connect here, as relay's
// DialTimeout bounds the box's.
const localDialTimeout = 30 * time.Second

// startRemote starts the listeners in the box of the remote forwards fws
// (-R), all at once, and waits for them, as ssh waits for its
// tcpip-forward replies before the session with ExitOnForwardFailure: so
// each is there before the command runs. One the box cannot listen for
// is ssh's warning (with the box's reason), or with ExitOnForwardFailure
// the error that ends the run.
func (f *forwarder) startRemote(fws []Forward) error {
	ls := make([]*relay.Listener, len(fws))
	errs := make([]error, len(fws))
	var wg sync.WaitGroup
	for i, fw := range fws {
		wg.Go(func() { ls[i], errs[i] = relay.Listen(f.ctx, f.c, f.r.o.Box(), fw.listenSpec(), f.r.progress()) })
	}
	wg.Wait()
	failed := func(fw Forward) string {
		if fw.ListenPath != "" {
			return "remote port forwarding failed for listen path " + fw.ListenPath
		}
		return "remote port forwarding failed for listen port " + strconv.Itoa(fw.ListenPort)
	}
	if f.r.o.ExitOnForwardFailure {
		for i, err := range errs {
			if err != nil {
				// The listeners made are closed by the caller's stop.
				for _, l := range ls {
					if l != nil {
						f.remotes = append(f.remotes, l)
					}
				}
				return fmt.Errorf("%s: %w", failed(fws[i]), err)
			}
		}
	}
	for i, fw := range fws {
		if err := errs[i]; err != nil {
			f.r.logf(LogInfo, "Warning: %s: %v", failed(fw), err)
			continue
		}
		l := ls[i]
		if fw.ListenPath == "" && fw.ListenPort == 0 {
			f.r.logf(LogInfo, "Allocated port %d for remote forward to %s", l.Port(), fw.connectString())
		}
		f.r.debugf(LogDebug1, "Connections to %s in box %s forwarded to %s", l.Spec(), f.r.o.Box(), fw.connectString())
		f.remotes = append(f.remotes, l)
		f.loops.Go(func() {
			f.acceptRemote(l, flagOf(fw), fw.Dynamic, func(host string, port int) (net.Conn, error) {
				if fw.Dynamic {
					// Where the connection's SOCKS request asks.
					return net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), localDialTimeout)
				}
				if fw.ConnectPath != "" {
					return net.DialTimeout("unix", fw.ConnectPath, localDialTimeout)
				}
				return net.DialTimeout("tcp", net.JoinHostPort(fw.ConnectHost, strconv.Itoa(fw.ConnectPort)), localDialTimeout)
			})
		})
	}
	return nil
}

// listenSpec is what a remote forward listens on in the box: its bind
// address as ssh sends it in its tcpip-forward (none given is
// "localhost", "*" or "" every address).
func (fw Forward) listenSpec() relay.ListenSpec {
	if fw.ListenPath != "" {
		return relay.ListenSpec{Mode: relay.ListenUnix, Path: fw.ListenPath}
	}
	host := fw.ListenHost
	if !fw.Explicit {
		host = "localhost"
	}
	return relay.ListenSpec{Mode: relay.ListenTCP, Host: host, Port: uint32(fw.ListenPort)}
}

// startAgent starts the agent listener of -A in the box and returns its
// socket's path, for SSH_AUTH_SOCK; each connection to it goes to the
// local agent at sock. An agent that cannot be reached at sock is not
// forwarded, without a word, as ssh's check_agent_present drops -A; one
// the box cannot make is a warning. Either way "": the command runs
// without the agent.
func (f *forwarder) startAgent(sock string) string {
	c, err := net.DialTimeout("unix", sock, localDialTimeout)
	if err != nil {
		f.r.debugf(LogDebug1, "No agent forwarded: %v", err)
		return ""
	}
	c.Close()
	l, err := relay.Listen(f.ctx, f.c, f.r.o.Box(), relay.ListenSpec{Mode: relay.ListenAgent}, f.r.progress())
	if err != nil {
		f.r.logf(LogInfo, "Warning: agent forwarding failed: %v", err)
		return ""
	}
	f.r.debugf(LogDebug1, "Agent connections to %s in box %s forwarded to %s", l.Path(), f.r.o.Box(), sock)
	f.remotes = append(f.remotes, l)
	f.loops.Go(func() {
		f.acceptRemote(l, "-A", false, func(string, int) (net.Conn, error) {
			return net.DialTimeout("unix", sock, localDialTimeout)
		})
	})
	return l.Path()
}

// acceptRemote forwards each connection l accepts in the box to what
// dial connects to here, until l ends. With dynamic, the connection's
// first bytes are a SOCKS request, which says where dial connects. A
// connection that cannot be made here is closed in the box, with a line
// as ssh's "connect_to ... failed" (what names the forward). A listener
// that ends by itself (the box hibernated or went away), not closed by
// stop, is one line and a value on f.lost.
func (f *forwarder) acceptRemote(l *relay.Listener, what string, dynamic bool, dial func(host string, port int) (net.Conn, error)) {
	for {
		a, err := l.Accept()
		if err != nil {
			if !errors.Is(err, relay.ErrListenerClosed) {
				f.listenerLost(l, err)
			}
			return
		}
		f.conns.Go(func() {
			if dynamic {
				boxConn, err := a.Take(f.ctx)
				if err != nil {
					f.r.logf(LogInfo, "%s: %s: %v", f.r.env.Prog, what, err)
					return
				}
				defer boxConn.Close()
				local, err := socksConnect(boxConn, func(host string, port int) (relay.Conn, error) {
					c, err := dial(host, port)
					if err != nil {
						return nil, err
					}
					return c.(relay.Conn), nil
				})
				if err != nil {
					f.r.logf(LogInfo, "%s: %s: %v", f.r.env.Prog, what, err)
					return
				}
				splice(local.(net.Conn), boxConn)
				return
			}
			local, err := dial("", 0)
			if err != nil {
				a.Reject()
				f.r.logf(LogInfo, "%s: %s: %v", f.r.env.Prog, what, err)
				return
			}
			defer local.Close()
			boxConn, err := a.Take(f.ctx)
			if err != nil {
				f.r.logf(LogInfo, "%s: %s: %v", f.r.env.Prog, what, err)
				return
			}
			splice(local, boxConn)
		})
	}
}

// AgentSocket is the local agent socket -A (-o ForwardAgent) forwards,
// as ssh picks it: ForwardAgent's own value when it names a socket (a
// path, ~/ for HOME, or $NAME for a variable's value); for yes,
// IdentityAgent's (none: no agent), else $SSH_AUTH_SOCK. Empty when
// nothing is forwarded.
func (o *Options) AgentSocket(getenv func(string) string) string {
	v := o.otherValue("forwardagent")
	if b, ok := parseBool(v); ok || v == "" {
		if !b {
			return ""
		}
		switch ia := o.otherValue("identityagent"); ia {
		case "none":
			return ""
		case "", "SSH_AUTH_SOCK":
			return getenv("SSH_AUTH_SOCK")
		default:
			v = ia
		}
	}
	if name, ok := strings.CutPrefix(v, "$"); ok {
		return getenv(name)
	}
	if rest, ok := strings.CutPrefix(v, "~/"); ok {
		home := getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		return filepath.Join(home, rest)
	}
	return v
}

// listenerLost says that the box's listener l ended by itself, with
// err, and tells f.lost: -N then ends with 255, as ssh does when the
// connection that held its forwards is gone (sshserve ends its
// connection alike).
func (f *forwarder) listenerLost(l *relay.Listener, err error) {
	if errors.Is(err, io.EOF) {
		err = errors.New("the listener exited")
	}
	what := "agent forwarding"
	if spec := l.Spec(); spec.Mode != relay.ListenAgent {
		spec.Port = l.Port()
		what = "remote forwarding of " + spec.String()
	}
	f.r.logf(LogError, "%s: %s in box %s ended: %v", f.r.env.Prog, what, f.r.o.Box(), err)
	select {
	case f.lost <- struct{}{}:
	default:
	}
}
