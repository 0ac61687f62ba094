// Package faultproxy is a TCP proxy that breaks its links the ways a real
// network does: it resets connections a fixed time after they open (a
// front end ending old streams, a NAT forgetting a mapping), freezes the
// link (a laptop asleep: nothing moves either way, nothing is closed), and
// resets everything while refusing new connections for a while (a network
// change). Tests put it in front of a local box.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards each connection accepted on its listener to Target, byte
// for byte both ways with half-close, until a fault is injected.
type Proxy struct {
	lis    net.Listener
	target string

	mu sync.Mutex
	// conns are the open links.
	conns map[*link]struct{}
	// every, if not zero, resets each link that long after it opened.
	every time.Duration
	// thaw, if not nil, is closed when a freeze ends.
	thaw chan struct{}
	// refuseUntil is when an outage ends.
	refuseUntil time.Time
	// delay is the round trip added to links opened from now on (Delay).
	delay    time.Duration
	accepted int
	resets   int
	closed   bool
	wg       sync.WaitGroup
}

// Listen starts a proxy on addr ("127.0.0.1:0" for any free port) to
// target, a TCP HOST:PORT. Close stops it.
func Listen(addr, target string) (*Proxy, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{lis: lis, target: target, conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's HOST:PORT.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// ResetEvery resets each link d after it opened, those open now (counted
// from when they opened) and those to come; 0 stops it.
func (p *Proxy) ResetEvery(d time.Duration) {
	p.mu.Lock()
	p.every = d
	for l := range p.conns {
		l.schedule(d)
	}
	p.mu.Unlock()
}

// Delay adds rtt to the round trip of the links opened from now on: each
// chunk read, in each direction, is written on half of rtt later. What is
// in flight is buffered without a bound, as a long fat path carries it,
// so the windows of the protocol above, not the proxy, bound a stream.
func (p *Proxy) Delay(rtt time.Duration) {
	p.mu.Lock()
	p.delay = rtt
	p.mu.Unlock()
}

// Reset resets every open link now: both ends read ECONNRESET.
func (p *Proxy) Reset() {
	p.mu.Lock()
	ls := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		ls = append(ls, l)
	}
	p.resets += len(ls)
	p.mu.Unlock()
	for _, l := range ls {
		l.reset()
	}
}

// Freeze stops every link for d: no byte is forwarded either way, and new
// connections wait; nothing is closed. Bytes already read are delivered
// when it ends, as a laptop that wakes sends what it had queued.
func (p *Proxy) Freeze(d time.Duration) {
	p.mu.Lock()
	if p.thaw == nil {
		p.thaw = make(chan struct{})
	}
	thaw := p.thaw
	p.mu.Unlock()
	time.AfterFunc(d, func() { p.thawIf(thaw) })
}

// Thaw ends a freeze now.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	thaw := p.thaw
	p.mu.Unlock()
	p.thawIf(thaw)
}

func (p *Proxy) thawIf(thaw chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if thaw != nil && p.thaw == thaw {
		close(thaw)
		p.thaw = nil
	}
}

// Outage resets every open link and refuses new connections (each is
// reset as it comes) for d, as a move to another network does.
func (p *Proxy) Outage(d time.Duration) {
	p.mu.Lock()
	p.refuseUntil = time.Now().Add(d)
	p.mu.Unlock()
	p.Reset()
}

// Stats are counts since the proxy started.
type Stats struct {
	// Accepted is how many connections came; Resets how many links a
	// fault reset (refused ones included); Open how many are open now.
	Accepted, Resets, Open int
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Accepted: p.accepted, Resets: p.resets, Open: len(p.conns)}
}

// Close stops accepting, resets every link and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.thaw != nil {
		close(p.thaw)
		p.thaw = nil
	}
	p.mu.Unlock()
	err := p.lis.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		refuse := time.Now().Before(p.refuseUntil)
		if refuse {
			p.resets++
		}
		p.mu.Unlock()
		if refuse {
			abort(c)
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// gate waits while the link is frozen; false when the proxy closed.
func (p *Proxy) gate() bool {
	p.mu.Lock()
	thaw := p.thaw
	p.mu.Unlock()
	if thaw != nil {
		<-thaw
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

// link is one proxied connection: the client's and the target's.
type link struct {
	p      *Proxy
	a, b   net.Conn
	opened time.Time
	timer  *time.Timer
	once   sync.Once
}

func (p *Proxy) forward(a net.Conn) {
	defer p.wg.Done()
	if !p.gate() {
		abort(a)
		return
	}
	b, err := net.Dial("tcp", p.target)
	if err != nil {
		abort(a)
		return
	}
	l := &link{p: p, a: a, b: b, opened: time.Now()}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		abort(a)
		abort(b)
		return
	}
	p.conns[l] = struct{}{}
	l.schedule(p.every)
	half := p.delay / 2
	p.mu.Unlock()
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); p.pipe(b, a, half) }()
	go func() { defer both.Done(); p.pipe(a, b, half) }()
	both.Wait()
	p.mu.Lock()
	delete(p.conns, l)
	if l.timer != nil {
		l.timer.Stop()
	}
	p.mu.Unlock()
	a.Close()
	b.Close()
}

// schedule arms the link's reset d after it opened (at once if that is
// past); 0 disarms it. p.mu is held.
func (l *link) schedule(d time.Duration) {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if d > 0 {
		l.timer = time.AfterFunc(max(0, time.Until(l.opened.Add(d))), func() {
			l.p.mu.Lock()
			l.p.resets++
			l.p.mu.Unlock()
			l.reset()
		})
	}
}

// reset aborts both connections of the link.
func (l *link) reset() {
	l.once.Do(func() {
		abort(l.a)
		abort(l.b)
	})
}

// chunk is what one read got, due to be written at due.
type chunk struct {
	b   []byte
	due time.Time
	err error
}

// pipe copies from src to dst while the link is not frozen, each chunk
// delay after it was read, and half-closes dst at src's end.
func (p *Proxy) pipe(dst, src net.Conn, delay time.Duration) {
	q := make(chan chunk, 1<<16)
	if delay == 0 {
		// One read at a time: a frozen link then holds its sender back.
		q = make(chan chunk)
	}
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 64<<10)
			n, err := src.Read(buf)
			q <- chunk{buf[:n], time.Now().Add(delay), err}
			if err != nil {
				return
			}
		}
	}()
	// Whatever way this ends, the reader's last sends are taken: it ends
	// at src's end or reset.
	defer func() {
		go func() {
			for range q {
			}
		}()
	}()
	for c := range q {
		n, err := len(c.b), c.err
		time.Sleep(time.Until(c.due))
		if n > 0 {
			if !p.gate() {
				return
			}
			if _, werr := dst.Write(c.b); werr != nil {
				abort(src)
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
					return
				}
			}
			abort(dst)
			return
		}
	}
}

// abort closes c with a reset (SO_LINGER 0) rather than a FIN.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
