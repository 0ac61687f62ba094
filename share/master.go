package share

// The control master: a background process that holds one connection to
// an endpoint and serves it, as a gRPC proxy that decodes nothing, on a
// unix socket of its user's, until it has been idle for the persist time,
// its connection fails, its socket is removed or replaced, the machine
// sleeps, or it is sent SIGTERM. box.Dial reaches it (box.WithSharing);
// Start starts one.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	"github.com/cocoonbox/cocoonbox/internal/window"
)

// DefaultPersist is how long a master stays with no call open, as
// OpenSSH's ControlPersist.
const DefaultPersist = 10 * time.Minute

// connectTimeout bounds the master's first connection to the endpoint.
const connectTimeout = 30 * time.Second

// pollEvery is how often the master checks that its socket is still its own.
const pollEvery = time.Second

// probeAfter is how long the master's connection may carry nothing
// before a check (CheckMethod) first asks the endpoint whether it is
// still there, and probeTimeout how long it waits for the answer.
const (
	probeAfter   = 10 * time.Second
	probeTimeout = 3 * time.Second
)

// A call forwarded on a connection that died within probeAfter of its
// last answer passes the check and would wait for the keepalive (30 s of
// silence and 15 s more by default). So a call whose first answer has not
// come lateAfter round trips of the connection after it was sent (at
// least lateMin, and lateMax while the round trip is not known) makes the
// master ask the endpoint as the check does: no answer within
// probeTimeout ends the call (UNAVAILABLE) and the master, 3.2 s after
// the call was sent on a near link.
const (
	lateAfter = 10
	lateMin   = 200 * time.Millisecond
	lateMax   = time.Second
)

// healthMethod is gRPC's standard health check: any answer to it, even
// Unimplemented or Unauthenticated, shows the connection carries calls.
const healthMethod = "/grpc.health.v1.Health/Check"

// suspendGap is how far the wall clock may run ahead of the monotonic one
// between two polls before the master takes it that the machine slept.
const suspendGap = 5 * time.Second

// Upstream is a control master's connection to its endpoint
// (box.DialUpstream).
type Upstream struct {
	// Conn is the connection, made lazily; Serve connects it and closes
	// it at the end.
	Conn *grpc.ClientConn
	// LinkError is a call's error on Conn with the timed-out read or write
	// attached that the connection failed for, if any (WithLinkTimedOut).
	LinkError func(error) error
	// Buffer is the size of the socket buffers, in bytes, of the clients'
	// connections to the master (box.Dial's), which the master's socket
	// side uses too, not to slow a stream down.
	Buffer int
}

// Master is one control master's settings.
type Master struct {
	// URL is the endpoint's URL, for the log.
	URL string
	// Dial makes the master's connection to the endpoint, as box.Dial
	// would (box.DialUpstream), with windows sized to rtt, the link's
	// measured round trip (window.ForRTT), or the default ones for 0.
	Dial func(rtt time.Duration) (*Upstream, error)
	// Socket is the path to serve; Lock is the lock file the starter
	// took, held until Serve returns.
	Socket string
	Lock   *os.File
	// Persist is how long the master stays with no call open.
	Persist time.Duration
	// Log, if not empty, is a file to append one line to per event.
	Log string
}

// Serve connects to the endpoint (m.Dial), then serves the socket until
// it has had no call open for m.Persist, its connection fails or does not
// answer a check, its socket is removed or replaced, the machine sleeps,
// or it is sent SIGTERM, SIGINT or SIGHUP. It returns why it ended; an error means it
// could not start or its connection failed.
func (m *Master) Serve() error {
	defer m.Lock.Close()
	defer m.removeLock()
	if fi, err := os.Lstat(m.Socket); err == nil && !fi.IsDir() {
		os.Remove(m.Socket) // stale: a live master would hold the lock
	}
	u, err := m.Dial(0)
	if err != nil {
		return err
	}
	if err := ready(u.Conn); err != nil {
		u.Conn.Close()
		m.logf("no connection to %s: %v", m.URL, err)
		return err
	}
	u = m.sized(u)
	up := u.Conn
	defer up.Close()

	lis, err := net.Listen("unix", m.Socket)
	if err != nil {
		return err
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(m.Socket, 0o600); err != nil {
		lis.Close()
		return err
	}
	mine, err := os.Lstat(m.Socket)
	if err != nil {
		lis.Close()
		return err
	}
	m.logf("master %d serving %s for %s", os.Getpid(), m.Socket, m.URL)

	p := &proxy{up: up, log: m.logf, link: u.LinkError, idle: make(chan struct{}, 1), dead: make(chan struct{}), start: time.Now()}
	go p.measure()
	// The windows box.Dial asks for on a unix socket.
	srv := grpc.NewServer(
		grpc.UnknownServiceHandler(p.handle),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(math.MaxInt32),
		grpc.InitialWindowSize(window.LocalStream),
		grpc.InitialConnWindowSize(window.LocalConn),
		grpc.ReadBufferSize(u.Buffer),
		grpc.WriteBufferSize(u.Buffer),
		experimental.BufferPool(bufpool.Shared),
	)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()

	why := m.wait(p, up, mine, served)
	m.logf("master %d exits: %s", os.Getpid(), why)
	if fi, err := os.Lstat(m.Socket); err == nil && os.SameFile(fi, mine) {
		os.Remove(m.Socket)
	}
	// New calls go direct from here; those open end as the endpoint ends them.
	srv.GracefulStop()
	if why == errUpstream {
		return fmt.Errorf("the connection to %s failed", m.URL)
	}
	return nil
}

var errUpstream = errors.New("its connection to the endpoint failed")

// sizeSamples is how many health checks measure the round trip that
// sizes the connection's windows (sized).
const sizeSamples = 2

// sized measures the round trip of u, a ready connection with the default
// windows, and returns a ready connection whose windows are sized to it
// (window.ForRTT), u closed, when that makes them larger; else u. It runs
// before the master serves its socket, so no call waits for it: they
// dial the endpoint themselves until then.
func (m *Master) sized(u *Upstream) *Upstream {
	p := &proxy{up: u.Conn}
	rtt := time.Duration(math.MaxInt64)
	for range sizeSamples {
		d, err := p.probe(context.Background())
		if err != nil {
			return u
		}
		rtt = min(rtt, d)
	}
	stream, _ := window.ForRTT(rtt)
	if stream <= window.Stream {
		return u
	}
	s, err := m.Dial(rtt)
	if err != nil {
		return u
	}
	if err := ready(s.Conn); err != nil {
		s.Conn.Close()
		return u
	}
	u.Conn.Close()
	m.logf("stream window %d MiB for a round trip of %v", stream>>20, rtt.Round(time.Millisecond))
	return s
}

// wait returns the first reason to end.
func (m *Master) wait(p *proxy, up *grpc.ClientConn, mine os.FileInfo, served <-chan error) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	broken := make(chan struct{})
	go func() {
		for s := up.GetState(); s == connectivity.Ready; s = up.GetState() {
			up.WaitForStateChange(context.Background(), s)
		}
		close(broken)
	}()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	last := time.Now()
	idle := time.NewTimer(m.Persist)
	defer idle.Stop()
	for {
		select {
		case s := <-sigs:
			return fmt.Errorf("signal %v", s)
		case <-broken:
			return errUpstream
		case <-p.dead:
			return errors.New("its connection did not answer a check")
		case err := <-served:
			return fmt.Errorf("serve: %v", err)
		case <-tick.C:
			if fi, err := os.Lstat(m.Socket); err != nil || !os.SameFile(fi, mine) {
				return errors.New("its socket was removed or replaced")
			}
			// The monotonic clock stops while the machine sleeps and the
			// wall clock does not: after a sleep the connection may be dead
			// with nothing to say so until a call's keepalive fails, so the
			// next call had better dial.
			now := time.Now()
			if now.Round(0).Sub(last.Round(0))-now.Sub(last) > suspendGap {
				return errors.New("the machine slept")
			}
			last = now
		case <-p.idle:
			idle.Reset(m.Persist)
		case <-idle.C:
			if p.open() == 0 {
				return fmt.Errorf("idle for %v", m.Persist)
			}
		}
	}
}

// ready connects up and waits until it is ready, or has failed.
func ready(up *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	up.Connect()
	for {
		s := up.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return errors.New(s.String())
		}
		if !up.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

// removeLock removes the lock file, if it is still the one held: one who
// opened it just before finds it locked, and one who comes after makes a
// new one; should two masters start all the same, the one whose socket is
// replaced exits.
func (m *Master) removeLock() {
	p := strings.TrimSuffix(m.Socket, ".sock") + ".lock"
	held, err1 := m.Lock.Stat()
	fi, err2 := os.Lstat(p)
	if err1 == nil && err2 == nil && os.SameFile(held, fi) {
		os.Remove(p)
	}
}

func (m *Master) logf(format string, args ...any) { logLine(m.Log, format, args...) }

// proxy forwards each call as it comes, metadata (the caller's token
// among it), messages, headers, trailers and status, without decoding it.
type proxy struct {
	up  *grpc.ClientConn
	log func(string, ...any)
	// link adds why the connection failed to a call's error.
	link func(error) error
	// idle gets a value each time the last open call ends.
	idle chan struct{}

	// dead is closed when the connection did not answer a check.
	dead     chan struct{}
	deadOnce sync.Once
	// heard is when the connection last carried an answer, as time since
	// start (monotonic).
	start time.Time
	heard atomic.Int64
	// rtt is the connection's round trip (measure), 0 until known.
	rtt atomic.Int64

	mu    sync.Mutex
	calls int
}

func (p *proxy) hear() { p.heard.Store(int64(time.Since(p.start))) }

// rttSamples is how many health checks measure the connection's round trip.
const rttSamples = 3

// probe sends the endpoint a health check, at most probeTimeout, and
// returns its round trip, or the error of a connection that did not
// answer (any answer, an error status included, is one).
func (p *proxy) probe(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	t := time.Now()
	err := p.up.Invoke(ctx, healthMethod, &frame{}, new(frame), grpc.ForceCodecV2(rawCodec{}))
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return 0, err
	}
	return time.Since(t), nil
}

// measure sets rtt to the shortest of a few health checks' round trips.
func (p *proxy) measure() {
	best := time.Duration(math.MaxInt64)
	for range rttSamples {
		d, err := p.probe(context.Background())
		if err != nil {
			p.log("round trip not measured: %v", err)
			return
		}
		best = min(best, d)
	}
	p.rtt.Store(int64(best))
	p.log("round trip %v", best)
}

// check answers CheckMethod: at once while the connection is known to
// work (another call is open, so its keepalive runs, or it carried an
// answer lately), else after the endpoint answers a health check.
// Its reply is the connection's round trip (measure), zero until known.
func (p *proxy) check(ss grpc.ServerStream) error {
	if err := ss.RecvMsg(new(frame)); err != nil {
		return err
	}
	if p.open() == 1 && time.Since(p.start)-time.Duration(p.heard.Load()) > probeAfter {
		if _, err := p.probe(ss.Context()); err != nil {
			p.log("check: no answer from the endpoint: %v", err)
			p.deadOnce.Do(func() { close(p.dead) })
			return errNoAnswer
		}
		p.hear()
	}
	b, err := proto.Marshal(durationpb.New(time.Duration(p.rtt.Load())))
	if err != nil {
		return err
	}
	return ss.SendMsg(&frame{b: mem.BufferSlice{mem.SliceBuffer(b)}})
}

func (p *proxy) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func (p *proxy) enter() {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
}

func (p *proxy) leave() {
	p.mu.Lock()
	p.calls--
	last := p.calls == 0
	p.mu.Unlock()
	if last {
		select {
		case p.idle <- struct{}{}:
		default:
		}
	}
}

var callDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

func (p *proxy) handle(_ any, ss grpc.ServerStream) error {
	p.enter()
	defer p.leave()
	method, _ := grpc.MethodFromServerStream(ss)
	if method == CheckMethod {
		return p.check(ss)
	}
	p.log("call %s", method)
	in, _ := metadata.FromIncomingContext(ss.Context())
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), forwardable(in)))
	defer cancel()
	cs, err := p.up.NewStream(ctx, callDesc, method, grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(math.MaxInt32))
	if err != nil {
		return p.link(err)
	}
	go func() {
		for {
			f := new(frame)
			if err := ss.RecvMsg(f); err != nil {
				if err == io.EOF {
					cs.CloseSend()
				} else {
					cancel()
				}
				return
			}
			if err := cs.SendMsg(f); err != nil {
				// The upstream's status comes out of RecvMsg below.
				return
			}
		}
	}()
	answered, dead := make(chan struct{}), make(chan struct{})
	go p.watch(ss.Context(), cancel, answered, dead)
	headerSent := false
	for {
		f := new(frame)
		err := cs.RecvMsg(f)
		if !headerSent {
			close(answered)
		}
		if status.Code(err) != codes.Unavailable {
			p.hear()
		}
		if !headerSent {
			headerSent = true
			if h, herr := cs.Header(); herr == nil && len(h) > 0 {
				ss.SendHeader(h)
			}
		}
		if err != nil {
			select {
			case <-dead:
				return errNoAnswer
			default:
			}
			ss.SetTrailer(forwardable(cs.Trailer()))
			if err == io.EOF {
				return nil
			}
			return p.link(err)
		}
		if err := ss.SendMsg(f); err != nil {
			return err
		}
	}
}

// errNoAnswer is the error of a call (or check) that found the master's
// connection dead.
var errNoAnswer = status.Error(codes.Unavailable, "the control master's connection does not answer")

// watch waits for a forwarded call's first answer (answered closed) and,
// when it is late (lateAfter), asks the endpoint: when that gets no answer
// either, the connection is dead, so watch closes dead, cancels the call
// and ends the master (p.dead). ctx is the call's server side, so it
// carries no outgoing metadata (the health check goes without the
// caller's token, as the check's does); watch returns when it is done.
func (p *proxy) watch(ctx context.Context, cancel context.CancelFunc, answered <-chan struct{}, dead chan<- struct{}) {
	late := lateMax
	if rtt := time.Duration(p.rtt.Load()); rtt > 0 {
		late = min(max(lateAfter*rtt, lateMin), lateMax)
	}
	t := time.NewTimer(late)
	defer t.Stop()
	select {
	case <-answered:
		return
	case <-ctx.Done():
		return
	case <-t.C:
	}
	_, err := p.probe(ctx)
	select {
	case <-answered:
		return
	case <-ctx.Done():
		return
	default:
	}
	if err == nil {
		p.hear()
		return
	}
	p.log("call: no answer from the endpoint: %v", err)
	close(dead)
	cancel()
	p.deadOnce.Do(func() { close(p.dead) })
}

// forwardable is md without what gRPC sets itself for each hop.
func forwardable(md metadata.MD) metadata.MD {
	out := metadata.MD{}
	for k, v := range md {
		switch {
		case k == "" || k[0] == ':', k == "content-type", k == "user-agent", k == "te",
			k == "grpc-status", k == "grpc-message", k == "grpc-status-details-bin", k == "grpc-timeout", k == "grpc-encoding", k == "grpc-accept-encoding":
			continue
		}
		out[k] = v
	}
	return out
}

// frame is one message as bytes.
type frame struct{ b mem.BufferSlice }

// rawCodec passes messages through as they are; its name is "proto", the
// codec the calls were made with, so the wire does not change.
type rawCodec struct{}

var _ encoding.CodecV2 = rawCodec{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("control master: cannot send %T", v)
	}
	b := f.b
	f.b = nil
	return b, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("control master: cannot receive into %T", v)
	}
	data.Ref()
	f.b = data
	return nil
}

func (rawCodec) Name() string { return "proto" }
