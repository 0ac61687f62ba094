package localbox

import (
	"container/list"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Before authentication (docs/self-hosting.md "Connections before sign-in"):
// a connection to a TCP listener is anonymous until a call on it carries a
// valid token, and the sign-in pages' connections stay anonymous. Anonymous
// connections are capped in all and per source, another one closed to
// make room for a new one (a full cap refuses no one: a new client's
// connection is anonymous too until its first call; victimLocked and
// victimIn say which), and each is closed once it has sent nothing for a
// while, whether it is in its TLS handshake, before its HTTP/2 preface,
// or between calls with no valid token.
const (
	// DefaultAnonConns is how many anonymous connections a TCP listener
	// keeps in all.
	DefaultAnonConns = 128
	// DefaultAnonConnsPerSource is how many it keeps from one source: an
	// IPv4 address, or an IPv6 /64 (what one host is usually given).
	DefaultAnonConnsPerSource = 32
	// DefaultAnonIdle is how long an anonymous connection may send
	// nothing before it is closed. It is below wire.KeepaliveTime, so the
	// server's own pings, which a client answers, never keep one open.
	DefaultAnonIdle = 10 * time.Second
)

// gate tracks the anonymous connections of one listener.
type gate struct {
	max, perSource int
	idle           time.Duration
	logf           func(string, ...any)
	start          time.Time // the base of anonConn.last (monotonic)

	mu       sync.Mutex
	seq      uint64                // of the last admitted
	n        int                   // anonymous connections held
	bySource map[string]*list.List // of *anonConn, oldest first
	closed   int                   // evicted or idle since lastLog
	lastLog  time.Time
}

func newGate(total, perSource int, idle time.Duration, logf func(string, ...any)) *gate {
	return &gate{
		max:       max(total, 1),
		perSource: max(perSource, 1),
		idle:      idle,
		logf:      logf,
		start:     time.Now(),
		bySource:  map[string]*list.List{},
	}
}

// anonConn is an accepted connection while it is anonymous, and after.
// It sits under everything else (TLS, the sniffer, gRPC, HTTP), so it
// sees every byte a client sends, handshake included.
type anonConn struct {
	net.Conn
	g      *gate
	source string
	seq    uint64 // the order of admission
	// last is when a read last returned data, as time since g.start;
	// heard is set once one has.
	last  atomic.Int64
	heard atomic.Bool
	authd atomic.Bool
	timer *time.Timer
	// onAuth, if not nil, is called once a is authenticated; set before
	// a is handed on.
	onAuth func()

	// elem is a's place in its source's list, nil once out (g.mu).
	elem *list.Element

	closeOnce sync.Once
	closeErr  error
}

// admit tracks c, an accepted connection, as anonymous, closing others
// past the caps.
func (g *gate) admit(c net.Conn) *anonConn {
	a := &anonConn{Conn: c, g: g, source: sourceOf(c.RemoteAddr())}
	a.last.Store(int64(time.Since(g.start)))
	a.timer = time.AfterFunc(g.idle, a.checkIdle)
	var out []*anonConn
	g.mu.Lock()
	g.seq++
	a.seq = g.seq
	l := g.bySource[a.source]
	if l == nil {
		l = list.New()
		g.bySource[a.source] = l
	}
	a.elem = l.PushBack(a)
	g.n++
	for l.Len() > g.perSource {
		out = append(out, g.unlinkLocked(g.victimIn(l, a)))
	}
	for g.n > g.max {
		out = append(out, g.unlinkLocked(g.victimLocked(a)))
	}
	if len(out) > 0 {
		g.noteLocked(len(out), a.source)
	}
	g.mu.Unlock()
	for _, o := range out {
		o.Close()
	}
	return a
}

// noteLocked counts n closed connections and logs, at most once a
// minute, how many were: under a flood, one line per connection would
// fill the log.
func (g *gate) noteLocked(n int, source string) {
	g.closed += n
	if time.Since(g.lastLog) < time.Minute {
		return
	}
	if g.logf != nil {
		g.logf("closed connections without a valid token: %d since the last such line (caps %d in all, %d per source; idle %v); the last from %s",
			g.closed, g.max, g.perSource, g.idle, source)
	}
	g.closed, g.lastLog = 0, time.Now()
}

// victimLocked is the connection to close when there are too many in
// all: one of the source that has the most (victimIn, never keep, the
// connection just admitted), of those as big the one whose oldest is
// oldest. So a new client from a source of its own is not closed while
// fewer sources than the cap hold the rest, however fast they connect.
// The scan is over at most max+1 sources.
func (g *gate) victimLocked(keep *anonConn) *anonConn {
	var v *list.List
	for _, l := range g.bySource {
		if v == nil || l.Len() > v.Len() || l.Len() == v.Len() && l.Front().Value.(*anonConn).seq < v.Front().Value.(*anonConn).seq {
			v = l
		}
	}
	return g.victimIn(v, keep)
}

// victimIn is the connection of one source's list l to close to make
// room, never keep (the one just admitted, whose first bytes may still
// be on their way): one whose peer has closed it, else one that has
// sent nothing yet, the oldest, else the one silent for longest, bytes
// that wait to be read counting as sent now. A client, which sends
// first (its TLS ClientHello or HTTP/2 preface at once) and then keeps
// talking until its first call, so outlasts a flood from its own source
// of connections that are made and dropped, or held and silent: before,
// the oldest went, and a client dialled during such a flood was closed
// before its call. Only connections that talk as busily as it can take
// its place.
func (g *gate) victimIn(l *list.List, keep *anonConn) *anonConn {
	var v *anonConn
	vRank, vLast := 0, int64(0)
	now := int64(time.Since(g.start))
	for e := l.Front(); e != nil; e = e.Next() {
		a := e.Value.(*anonConn)
		if a == keep {
			continue
		}
		pending, gone := peerState(a.Conn)
		if gone {
			return a
		}
		rank, last := 2, a.last.Load()
		switch {
		case pending:
			last = now
		case !a.heard.Load():
			rank = 1
		}
		// The list is oldest first, so a tie keeps the older.
		if v == nil || rank < vRank || rank == vRank && last < vLast {
			v, vRank, vLast = a, rank, last
		}
	}
	if v == nil {
		return keep
	}
	return v
}

func (g *gate) unlinkLocked(a *anonConn) *anonConn {
	if a.elem == nil {
		return a
	}
	l := g.bySource[a.source]
	l.Remove(a.elem)
	if l.Len() == 0 {
		delete(g.bySource, a.source)
	}
	a.elem = nil
	g.n--
	return a
}

func (g *gate) remove(a *anonConn) {
	g.mu.Lock()
	g.unlinkLocked(a)
	g.mu.Unlock()
}

// count is how many anonymous connections g holds.
func (g *gate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

func (a *anonConn) Read(p []byte) (int, error) {
	n, err := a.Conn.Read(p)
	if n > 0 && !a.authd.Load() {
		a.last.Store(int64(time.Since(a.g.start)))
		a.heard.Store(true)
	}
	return n, err
}

// Close closes the connection and forgets it; every layer above ends up
// here, and only the first call closes.
func (a *anonConn) Close() error {
	a.closeOnce.Do(func() {
		a.timer.Stop()
		a.g.remove(a)
		a.closeErr = a.Conn.Close()
	})
	return a.closeErr
}

// authenticated takes a out of the gate for good: a call on it carried a
// valid token.
func (a *anonConn) authenticated() {
	// Every call comes here: a load, not a write, once it is done.
	if a.authd.Load() || a.authd.Swap(true) {
		return
	}
	a.timer.Stop()
	a.g.remove(a)
	if a.onAuth != nil {
		a.onAuth()
	}
}

func (a *anonConn) checkIdle() {
	if a.authd.Load() {
		return
	}
	quiet := time.Since(a.g.start) - time.Duration(a.last.Load())
	if quiet < a.g.idle {
		a.timer.Reset(a.g.idle - quiet)
		return
	}
	a.g.mu.Lock()
	if a.elem != nil {
		a.g.noteLocked(1, a.source)
	}
	a.g.mu.Unlock()
	a.Close()
}

// sourceOf is the source an address counts under: an IPv4 address (an
// IPv4-mapped one as IPv4), an IPv6 /64, or, for another kind of address,
// all of its kind together.
func sourceOf(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.Network()
	}
	return sourceOfIP(ta.AddrPort().Addr())
}

func sourceOfIP(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.WithZone("").Prefix(64)
	return p.String()
}

// gateConn is a connection handed to gRPC with the anonConn under it, so
// that gateCreds can tell gRPC which one a call came on.
type gateConn struct {
	net.Conn
	a *anonConn
}

// gateCreds is gRPC's handshake for the local box's connections: TLS, if
// any, is done before gRPC sees a connection (sniff.go), so it only passes
// each call's anonConn up as the peer's AuthInfo, and caps the age of its
// streams when maxStream is not zero (streamcap.go).
type gateCreds struct{ maxStream time.Duration }

// gateInfo is the AuthInfo of a call; a is nil on a unix socket.
type gateInfo struct {
	credentials.CommonAuthInfo
	a *anonConn
}

func (gateInfo) AuthType() string { return "localbox" }

func (gc gateCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var info gateInfo
	if g, ok := c.(*gateConn); ok {
		c, info = g.Conn, gateInfo{a: g.a}
	}
	if gc.maxStream > 0 {
		c = newCapConn(c, gc.maxStream)
	}
	return c, info, nil
}

func (gateCreds) ClientHandshake(_ context.Context, _ string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("localbox: gateCreds is for the server side")
}

func (gateCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "localbox"}
}

func (c gateCreds) Clone() credentials.TransportCredentials { return c }

func (gateCreds) OverrideServerName(string) error { return nil }

// markAuthenticated takes the connection of the call in ctx out of the
// gate.
func markAuthenticated(ctx context.Context) {
	if p, ok := peer.FromContext(ctx); ok {
		if i, ok := p.AuthInfo.(gateInfo); ok && i.a != nil {
			i.a.authenticated()
		}
	}
}
