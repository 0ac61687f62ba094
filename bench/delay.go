package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/halfclose"
)

var (
	delayTo  = flag.String("delay-to", "", "internal: serve one delay proxy to this address (see startDelay)")
	delayRTT = flag.Duration("delay-rtt", 0, "internal: the round trip of -delay-to")
)

// delayChild is a delay proxy in a process of its own, so that its
// buffers weigh neither on the bench process nor on the peak RSS the
// kernel reports for the clients it starts: a child started with
// CLONE_VM counts its parent's peak until exec.
type delayChild struct {
	cmd  *exec.Cmd
	in   io.Closer
	port int
}

// startDelay starts a delay proxy to target with a round trip of rtt in
// a child process (this binary with -delay-to).
func startDelay(target string, rtt time.Duration) (*delayChild, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := exec.Command(self, "-delay-to", target, "-delay-rtt", rtt.String())
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	port, err2 := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || err2 != nil {
		in.Close()
		c.Wait()
		return nil, fmt.Errorf("delay proxy: %q: %v", line, err)
	}
	return &delayChild{cmd: c, in: in, port: port}, nil
}

// Port is the proxy's loopback port.
func (d *delayChild) Port() int { return d.port }

// Close ends the proxy process.
func (d *delayChild) Close() {
	d.in.Close()
	d.cmd.Wait()
}

// serveDelay is the child's side: it prints the port, then proxies until
// its stdin closes.
func serveDelay() error {
	p, err := listenDelay(*delayTo, *delayRTT)
	if err != nil {
		return err
	}
	fmt.Println(p.lis.Addr().(*net.TCPAddr).Port)
	io.Copy(io.Discard, os.Stdin)
	return nil
}

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

// listenDelay listens on a free loopback port and proxies to target with a
// round trip of rtt added.
func listenDelay(target string, rtt time.Duration) (*delayProxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{lis: lis, target: target, half: rtt / 2}
	go p.serve()
	return p, nil
}

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
	if p.half == 0 {
		// A plain relay, which io.Copy makes with splice(2): at 0 ms the
		// proxy then costs either path next to nothing, as no proxy would.
		halfclose.Join(c, u)
	} else {
		var wg sync.WaitGroup
		wg.Go(func() { delayCopy(u.(*net.TCPConn), c, p.half) })
		wg.Go(func() { delayCopy(c, u.(*net.TCPConn), p.half) })
		wg.Wait()
	}
	c.Close()
	u.Close()
}

// chunkPool holds the proxy's 64 KiB read buffers, so that its garbage
// collector does not weigh on the faster path more than on the other.
var chunkPool = sync.Pool{New: func() any { return make([]byte, 64<<10) }}

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
			b := chunkPool.Get().([]byte)
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
		_, err := dst.Write(ch.b)
		chunkPool.Put(ch.b[:cap(ch.b)])
		if err != nil {
			src.Close()
			for range q {
			}
			return
		}
	}
	dst.CloseWrite()
}
