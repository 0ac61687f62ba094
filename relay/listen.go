package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// Listener is a listener inside a box (ssh -R, -A): one Exec of
// `cocoonbox-agent listen`, whose stdout announces each connection it
// accepts. Each accepted connection is then taken with an Exec of its
// own (Accepted.Take), so that every connection has its own stream, flow
// control and half-close (docs/architecture.md, "Listening in a box").
// The listener lives as long as its Exec: Close, the end of the client's
// connection or of the box ends it, and the box half then removes the
// sockets it made.
type Listener struct {
	c       *box.Client
	box     string
	spec    ListenSpec
	port    uint32
	path    string
	control string

	exec    *execPipes
	wmu     sync.Mutex // held while writing to the Exec's stdin
	accepts chan *Accepted
	// closing is closed when Close starts.
	closing chan struct{}
	once    sync.Once
}

// ErrNoListener is returned, wrapped, when the box's agent has no listen
// verb, or the box has no agent.
var ErrNoListener = errors.New("the box's cocoonbox-agent has no listen verb (remote and agent forwarding need it)")

// ErrListenerClosed is what Accept returns once Close was called.
var ErrListenerClosed = errors.New("relay: the listener is closed")

// Listen starts a listener in boxName as spec says and returns once it
// listens: a listener the box could not make is a *DialError with Listen
// set, whose Reason is the box half's (such as "address already in
// use"); a box without the verb wraps ErrNoListener. ctx bounds only the
// start; the listener lives until Close or the end of its Exec. progress,
// if not nil, gets one line per phase when the box has to be woken
// first (box.Command's Progress).
func Listen(ctx context.Context, c *box.Client, boxName string, spec ListenSpec, progress io.Writer) (*Listener, error) {
	if err := spec.Check(); err != nil {
		return nil, err
	}
	args := append([]string{"exec", "cocoonbox-agent", "listen"}, spec.Args()...)
	for i := 3; i < len(args); i++ {
		args[i] = shellquote.Quote(args[i])
	}
	p := startExec(ctx, c, boxName, strings.Join(args, " "), false, progress, func(st box.ExitStatus, stderrLine string) error {
		switch {
		case st.Code == 127:
			return fmt.Errorf("box %s: %w", boxName, ErrNoListener)
		case st.Code == ExitListen:
			return &DialError{Box: boxName, Addr: spec.String(), Reason: boxReason(stderrLine, "listen ", "cannot listen"), Listen: true}
		case st.Code != 0 || st.Signal != "" || st.Error != "":
			if stderrLine == "" {
				stderrLine = st.Text()
			}
			return fmt.Errorf("listener on %s in box %s: %s", spec, boxName, stderrLine)
		}
		return nil
	})
	l := &Listener{c: c, box: boxName, spec: spec, exec: p, accepts: make(chan *Accepted), closing: make(chan struct{})}
	defer cancelOn(ctx, p.cancel)()
	br := bufio.NewReader(p.stdout)
	ev, err := readEvent(br)
	if err == nil && ev.Event != "listening" {
		err = fmt.Errorf("listener on %s in box %s: it answered %q before listening", spec, boxName, ev.Event)
	}
	if err != nil {
		p.cancel()
		<-p.done
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, errOldAgent):
			return nil, fmt.Errorf("box %s: %w", boxName, ErrNoListener)
		case p.err != nil:
			return nil, p.err
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("listener on %s in box %s: it ended before listening", spec, boxName)
		}
		return nil, err
	}
	l.port, l.path, l.control = ev.Port, ev.Path, ev.Control
	go l.readAccepts(br)
	return l, nil
}

// errOldAgent is an agent's JSON usage line: it has no listen verb.
var errOldAgent = errors.New("relay: the box's agent has no listen verb")

// readEvent reads one Event line.
func readEvent(br *bufio.Reader) (Event, error) {
	var ev Event
	line, err := br.ReadBytes('\n')
	if err != nil {
		return ev, err
	}
	var old struct {
		OK *bool `json:"ok"`
	}
	if json.Unmarshal(line, &old) == nil && old.OK != nil {
		return ev, errOldAgent
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return ev, fmt.Errorf("relay: a listener's line %q: %w", strings.TrimSpace(string(line)), err)
	}
	return ev, nil
}

// readAccepts hands each "accept" Event to Accept until the Exec's stdout
// ends.
func (l *Listener) readAccepts(br *bufio.Reader) {
	defer close(l.accepts)
	defer l.exec.stdout.Close()
	for {
		ev, err := readEvent(br)
		if err != nil {
			return
		}
		if ev.Event != "accept" {
			continue
		}
		select {
		case l.accepts <- &Accepted{Host: ev.Host, Port: ev.Port, ID: ev.ID, l: l}:
		case <-l.exec.done:
			return
		}
	}
}

// Port is the TCP port listened on: the one the box chose when the spec
// asked for 0. Zero for a unix socket.
func (l *Listener) Port() uint32 { return l.port }

// Path is the unix socket listened on: the spec's, or the one the box
// made for agent forwarding. Empty for TCP.
func (l *Listener) Path() string { return l.path }

// Spec is what the listener was asked to listen on.
func (l *Listener) Spec() ListenSpec { return l.spec }

// Accept waits for the next connection the box accepted. It returns
// ErrListenerClosed after Close; when the listener's Exec ended by
// itself, the reason, or io.EOF for one that exited 0.
func (l *Listener) Accept() (*Accepted, error) {
	a, ok := <-l.accepts
	if ok {
		return a, nil
	}
	<-l.exec.done
	switch {
	case l.closed():
		return nil, ErrListenerClosed
	case l.exec.err != nil:
		return nil, l.exec.err
	}
	return nil, io.EOF
}

func (l *Listener) closed() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}

// closeGrace is how long Close waits for the box half to remove its
// sockets and exit before it cancels the Exec.
const closeGrace = 5 * time.Second

// Close ends the listener: EOF on its stdin, so that the box half
// removes its sockets and exits; its Exec is cancelled if it has not
// ended within a few seconds. Connections already taken go on.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.closing)
		l.wmu.Lock()
		l.exec.stdin.Close()
		l.wmu.Unlock()
		select {
		case <-l.exec.done:
		case <-time.After(closeGrace):
		}
		l.exec.cancel()
		<-l.exec.done
	})
	return nil
}

// Accepted is a connection the box's listener accepted, not yet taken.
// Take it, or Reject it.
type Accepted struct {
	// Host and Port are where it comes from, as the box saw it: an IP
	// address and port; empty and 0 for a unix socket's.
	Host string
	Port uint32
	// ID is the listener's name for it.
	ID uint64
	l  *Listener
}

// Take connects to the accepted connection with one Exec of
// `cocoonbox-agent take` and returns once that has it. A connection that
// has gone meanwhile is a *DialError.
func (a *Accepted) Take(ctx context.Context) (Conn, error) {
	l := a.l
	line := "exec cocoonbox-agent take " + shellquote.Quote(l.control) + " " + strconv.FormatUint(a.ID, 10)
	return dialLine(ctx, l.c, l.box, fmt.Sprintf("connection %d accepted on %s", a.ID, l.spec), line, false)
}

// Reject closes the accepted connection in the box without taking it.
func (a *Accepted) Reject() {
	b, _ := json.Marshal(Close{Close: a.ID})
	a.l.wmu.Lock()
	defer a.l.wmu.Unlock()
	a.l.exec.stdin.Write(append(b, '\n'))
}

// ListenPort listens on port (decimal; "0" asks the kernel for one) as
// OpenSSH binds a forward's listener (channel_setup_fwd_listener, with
// GatewayPorts clientspecified on sshd's side): "" and "*" every address,
// "localhost" the loopback address, each a socket per family, either
// being enough (port 0: the second on the port the first was given); an
// IP address that address alone, in its own family (0.0.0.0 is IPv4's
// every address, not IPv6's too); any other host the address it resolves
// to. The error is the first bind's.
func ListenPort(host, port string) ([]net.Listener, error) {
	type bind struct{ network, host string }
	var binds []bind
	switch ip := net.ParseIP(host); {
	case host == "" || host == "*":
		binds = []bind{{"tcp4", "0.0.0.0"}, {"tcp6", "::"}}
	case host == "localhost":
		binds = []bind{{"tcp4", "127.0.0.1"}, {"tcp6", "::1"}}
	case ip != nil && ip.To4() != nil:
		binds = []bind{{"tcp4", host}}
	case ip != nil:
		binds = []bind{{"tcp6", host}}
	default:
		binds = []bind{{"tcp", host}}
	}
	var ls []net.Listener
	var first error
	for _, b := range binds {
		l, err := net.Listen(b.network, net.JoinHostPort(b.host, port))
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		ls = append(ls, l)
		port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	if len(ls) == 0 {
		return nil, first
	}
	return ls, nil
}
