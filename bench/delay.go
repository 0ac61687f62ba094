package main

import (
	"net"
	"time"
)

// delayProxy forwards each loopback connection it accepts to target and
// holds every chunk, in each direction, for half the round trip before
// writing it on. It reads as fast as the sender writes and buffers what is
// in flight without a bound, as a long fat path would carry it: the round
// trip, not the proxy, limits what a window lets through.
type delayProxy struct {
	lis    net.Listener
	target string
	half   time.Duration
}

// startDelay listens on a free loopback port and proxies to target with a
// round trip of rtt added.
func startDelay(target string, rtt time.Duration) (*delayProxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{lis: lis, target: target, half: rtt / 2}
	go p.serve()
	return p, nil
}

// Port is the proxy's loopback port.
func (p *delayProxy) Port() int { return p.lis.Addr().(*net.TCPAddr).Port }

// Close stops accepting; connections already open run to their end.
func (p *delayProxy) Close() { p.lis.Close() }

func (p *delayProxy) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		go p.handle(c.(*net.TCPConn))
	}
}

func (p *delayProxy) handle(c *net.TCPConn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { delayCopy(u.(*net.TCPConn), c, p.half); done <- struct{}{} }()
	go func() { delayCopy(c, u.(*net.TCPConn), p.half); done <- struct{}{} }()
	<-done
	<-done
	c.Close()
	u.Close()
}

// delayCopy copies src to dst, each chunk written d after it was read, and
// half-closes dst at src's end.
func delayCopy(dst, src *net.TCPConn, d time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	// The channel's capacity is the buffer: 64 Ki chunks of up to 64 KiB
	// each, far beyond what any window here puts in flight.
	q := make(chan chunk, 1<<16)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 64<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		if w := time.Until(ch.at); w > 0 {
			time.Sleep(w)
		}
		if _, err := dst.Write(ch.b); err != nil {
			src.Close()
			for range q {
			}
			return
		}
	}
	dst.CloseWrite()
}
