package localbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"
	"golang.org/x/net/http/httpproxy"
)

// A container box reaches the network through an HTTP(S) proxy the local
// box runs for it, as the service's boxes get HTTP_PROXY: one listener
// per box, on the host's address of the box's own network (its gateway),
// answering only the box's addresses. The owner's Egress setting says
// which hosts it reaches; with a rule set, the box's network is internal
// (no route out but the proxy). The proxy chains to the local box's own
// HTTP_PROXY/HTTPS_PROXY where its NO_PROXY does not exempt the host.
// docs/self-hosting.md "Egress".

// Egress is the owner's setting for where container boxes reach through
// the egress proxy. Both lists empty: every host, and boxes keep their
// direct route out too. A host matches an entry that names it or a
// domain above it (example.com matches git.example.com); an IP address
// or CIDR entry matches a destination given as an address in it, and
// one of Deny also a name that resolves into it.
type Egress struct {
	// Allow, when not empty, are the only hosts boxes reach.
	Allow []string `json:"allow,omitempty"`
	// Deny are hosts boxes never reach, even when Allow names them.
	Deny []string `json:"deny,omitempty"`
}

// Ruled reports whether the owner set any rule: the boxes then have no
// route out but the proxy.
func (g Egress) Ruled() bool { return len(g.Allow) > 0 || len(g.Deny) > 0 }

// CheckEgressHost refuses an entry of Egress that is no host name, IP
// address or CIDR, naming it.
func CheckEgressHost(h string) error {
	if _, err := netip.ParsePrefix(h); err == nil {
		return nil
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	name := strings.TrimPrefix(strings.TrimPrefix(h, "*."), ".")
	if name == "" || len(name) > 253 {
		return fmt.Errorf("%q is no host name, IP address or CIDR", h)
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 || strings.Trim(l, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return fmt.Errorf("%q is no host name, IP address or CIDR", h)
		}
	}
	return nil
}

// matchHost reports whether host (a name or an address, no port) is one
// of entries.
func matchHost(entries []string, host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	addr, aerr := netip.ParseAddr(strings.Trim(host, "[]"))
	isAddr := aerr == nil
	for _, e := range entries {
		if p, err := netip.ParsePrefix(e); err == nil {
			if isAddr && p.Contains(addr.Unmap()) {
				return true
			}
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			if isAddr && a.Unmap() == addr.Unmap() {
				return true
			}
			continue
		}
		name := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(e, "*."), "."))
		if !isAddr && (host == name || strings.HasSuffix(host, "."+name)) {
			return true
		}
	}
	return false
}

// maxEgressConns is how many connections a box holds open to its egress
// proxy at most: far above a package manager's parallel downloads.
const maxEgressConns = 1024

// egressProxy is the local box's HTTP(S) proxy for its container boxes.
type egressProxy struct {
	rules Egress
	logf  func(format string, args ...any)
	px    *goproxy.ProxyHttpServer
	// upstream is the local box's own proxy for a URL (nil: direct), as
	// its environment says; upstreams are those proxies' addresses, which
	// the guard lets it dial.
	upstream  func(*url.URL) (*url.URL, error)
	upstreams []string
	// maxConns is how many connections a box holds open to its
	// listener at most (maxEgressConns).
	maxConns int
	// port is the port each box's listener asks for first: one per
	// local box, so that a box's proxy address survives a restart of the
	// local box where the port is free.
	port int

	mu   sync.Mutex
	lis  map[string]*egressListener // by box id
	done bool
}

// egressListener is one box's listener: its address, the box's network,
// and the server on it.
type egressListener struct {
	addr   string // host:port the box is given
	subnet netip.Prefix
	gw     netip.Addr
	srv    *http.Server
}

// refusedError is why the proxy refuses a destination: what the box's
// program shows.
type refusedError struct{ why string }

func (e *refusedError) Error() string { return e.why }

// newEgressProxy makes the proxy of rules, chained to the upstream
// proxies environ names (os.Getenv's names and values).
func newEgressProxy(rules Egress, port int, getenv func(string) string, logf func(string, ...any)) *egressProxy {
	cfg := &httpproxy.Config{
		HTTPProxy:  firstEnv(getenv, "HTTP_PROXY", "http_proxy"),
		HTTPSProxy: firstEnv(getenv, "HTTPS_PROXY", "https_proxy"),
		NoProxy:    firstEnv(getenv, "NO_PROXY", "no_proxy"),
	}
	g := &egressProxy{rules: rules, logf: logf, port: port, maxConns: maxEgressConns, lis: map[string]*egressListener{}}
	pf := cfg.ProxyFunc()
	g.upstream = pf
	for _, p := range []string{cfg.HTTPProxy, cfg.HTTPSProxy} {
		if u, err := url.Parse(p); err == nil && u.Host != "" {
			port := u.Port()
			switch {
			case port != "":
			case u.Scheme == "https":
				port = "443"
			default:
				port = "80"
			}
			g.upstreams = append(g.upstreams, net.JoinHostPort(u.Hostname(), port))
		}
	}
	px := goproxy.NewProxyHttpServer()
	px.Logger = discardLogger{}
	px.Tr = &http.Transport{
		Proxy:                 func(r *http.Request) (*url.URL, error) { return pf(r.URL) },
		DialContext:           g.dial,
		MaxIdleConns:          32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	px.ConnectDial = nil
	px.ConnectDialWithReq = func(req *http.Request, network, addr string) (net.Conn, error) {
		if u, _ := pf(&url.URL{Scheme: "https", Host: addr}); u != nil {
			d := px.NewConnectDialToProxy(u.String())
			if d == nil {
				return nil, fmt.Errorf("the local box's proxy %s is not one it can chain to (http:// or https://)", u.Redacted())
			}
			return d(network, addr)
		}
		return g.dial(req.Context(), network, addr)
	}
	px.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		if err := g.check(ctx.Req.Context(), host); err != nil {
			ctx.Resp = refusal(ctx.Req, err)
			return goproxy.RejectConnect, host
		}
		return goproxy.OkConnect, host
	})
	px.OnRequest().DoFunc(func(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		if err := g.check(r.Context(), r.URL.Host); err != nil {
			return r, refusal(r, err)
		}
		return r, nil
	})
	g.px = px
	return g
}

// discardLogger drops goproxy's log lines: the local box logs refusals
// itself.
type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

func firstEnv(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// refusal is the proxy's answer to a refused request: 403, with why in
// the status line (which curl -v and git show for a CONNECT) and body.
func refusal(r *http.Request, err error) *http.Response {
	msg := "cocoonbox egress proxy: " + err.Error()
	resp := goproxy.NewResponse(r, "text/plain; charset=utf-8", http.StatusForbidden, msg+"\n")
	resp.Status = "403 " + strings.ReplaceAll(msg, "\n", " ")
	return resp
}

// check refuses a destination (host or host:port) the owner's rules do
// not allow, and one that is this machine (its own addresses, loopback,
// link-local, the boxes' bridges) unless an address entry of Allow names
// it. The name is resolved here, to answer 403 with why (an upstream
// proxy may dial it); a direct dial checks again the address it
// connects to (dial), which a name's second answer may change.
func (g *egressProxy) check(ctx context.Context, hostport string) error {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	switch {
	case matchHost(g.rules.Deny, host):
		return &refusedError{fmt.Sprintf("%s is denied by the local box's egress rules (cocoonbox localbox start --egress-deny)", host)}
	case len(g.rules.Allow) > 0 && !matchHost(g.rules.Allow, host):
		return &refusedError{fmt.Sprintf("%s is not among the hosts the local box's egress rules allow (cocoonbox localbox start --egress-allow)", host)}
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil // the dial, or the upstream proxy, says what it makes of the name
	}
	for _, a := range addrs {
		if err := g.guard(a); err != nil {
			return err
		}
	}
	return nil
}

// guard refuses address a when an address entry of Deny holds it (the
// destination was a name that resolves there), and when it is this
// machine or a box's network unless an address entry of Allow names it.
func (g *egressProxy) guard(a netip.Addr) error {
	a = a.Unmap()
	if matchAddrEntry(g.rules.Deny, a) {
		return &refusedError{fmt.Sprintf("%s is denied by the local box's egress rules (cocoonbox localbox start --egress-deny)", a)}
	}
	if matchAddrEntry(g.rules.Allow, a) {
		return nil
	}
	if hostLocal(a) {
		return &refusedError{fmt.Sprintf("%s is this machine or a box's network, which boxes do not reach through the proxy (an owner may allow an address: --egress-allow %s)", a, a)}
	}
	return nil
}

// matchAddrEntry reports whether an IP address or CIDR entry of entries
// holds a.
func matchAddrEntry(entries []string, a netip.Addr) bool {
	for _, e := range entries {
		if p, err := netip.ParsePrefix(e); err == nil && p.Contains(a) {
			return true
		}
		if x, err := netip.ParseAddr(e); err == nil && x.Unmap() == a {
			return true
		}
	}
	return false
}

// metadataAddrs are clouds' instance metadata services at addresses
// that are not link-local: AWS's over IPv6 and Alibaba Cloud's.
var metadataAddrs = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}

// hostLocal reports whether a is this machine's: loopback, unspecified,
// link-local or multicast, a cloud's metadata service, an address of
// one of its interfaces, or in the network of a Linux bridge (a
// container engine's, where other boxes are).
func hostLocal(a netip.Addr) bool {
	if a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsMulticast() || a.IsInterfaceLocalMulticast() || slices.Contains(metadataAddrs, a) {
		return true
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return true
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		_, berr := os.Stat("/sys/class/net/" + ifc.Name + "/bridge")
		bridge := berr == nil
		for _, x := range addrs {
			n, ok := x.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			if ip.Unmap() == a {
				return true
			}
			ones, _ := n.Mask.Size()
			if bridge && netip.PrefixFrom(ip.Unmap(), ones).Contains(a) {
				return true
			}
		}
	}
	return false
}

// dial connects to addr, refusing (at connect time, after the name is
// resolved) an address guard refuses; an upstream proxy's address is
// dialed as it is.
func (g *egressProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !slices.Contains(g.upstreams, addr) {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			return g.guard(ap.Addr())
		}
	}
	c, err := d.DialContext(ctx, network, addr)
	var re *refusedError
	if errors.As(err, &re) {
		return nil, re
	}
	return c, err
}

// listen gives box id a listener at gateway gw of its network subnet
// (the proxy's port first, else any), answering only the box's addresses
// there; a box that has one keeps it. It returns the address to give the
// box.
func (g *egressProxy) listen(id string, gw netip.Addr, subnet netip.Prefix) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return "", errors.New("the egress proxy is closed")
	}
	if l := g.lis[id]; l != nil && l.gw == gw && l.subnet == subnet {
		return l.addr, nil
	} else if l != nil {
		l.srv.Close()
		delete(g.lis, id)
	}
	lc := net.ListenConfig{Control: freebind}
	ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(gw.String(), strconv.Itoa(g.port)))
	if err != nil {
		ln, err = lc.Listen(context.Background(), "tcp", net.JoinHostPort(gw.String(), "0"))
	}
	if err != nil {
		return "", err
	}
	l := &egressListener{addr: ln.Addr().String(), subnet: subnet, gw: gw,
		srv: &http.Server{Handler: g.px, ReadHeaderTimeout: 30 * time.Second}}
	g.lis[id] = l
	go l.srv.Serve(&peerListener{Listener: ln, max: g.maxConns, logf: g.logf, ok: func(a netip.Addr) bool { return a != gw && subnet.Contains(a) }})
	return l.addr, nil
}

// addr is box id's proxy address, "" when it has none.
func (g *egressProxy) addr(id string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.lis[id]; l != nil {
		return l.addr
	}
	return ""
}

// ports are the ports the listeners listen on, each once.
func (g *egressProxy) ports() []uint16 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []uint16
	for _, l := range g.lis {
		if ap, err := netip.ParseAddrPort(l.addr); err == nil && !slices.Contains(ps, ap.Port()) {
			ps = append(ps, ap.Port())
		}
	}
	return ps
}

// drop closes box id's listener: the box is gone.
func (g *egressProxy) drop(id string) {
	g.mu.Lock()
	l := g.lis[id]
	delete(g.lis, id)
	g.mu.Unlock()
	if l != nil {
		l.srv.Close()
	}
}

// close closes every listener: the local box is going away.
func (g *egressProxy) close() {
	g.mu.Lock()
	ls := g.lis
	g.lis = map[string]*egressListener{}
	g.done = true
	g.mu.Unlock()
	for _, l := range ls {
		l.srv.Close()
	}
}

// peerListener closes, unanswered, each connection whose peer ok
// refuses: the listener's address is the host's on a bridge, which
// another box (through its own gateway, into the host) or a host process
// could reach too. A box holding max connections open gets a 503 on
// the next and its close: each costs the local box a descriptor and
// ~20 KB, and a box could open tens of thousands.
type peerListener struct {
	net.Listener
	ok   func(netip.Addr) bool
	max  int
	logf func(string, ...any)
	live atomic.Int64
	said atomic.Bool
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
		if err != nil || !l.ok(ap.Addr().Unmap()) {
			c.Close()
			continue
		}
		tc, isTCP := c.(*net.TCPConn)
		if !isTCP {
			c.Close()
			continue
		}
		if l.live.Add(1) > int64(l.max) {
			l.live.Add(-1)
			c.SetWriteDeadline(time.Now().Add(time.Second))
			io.WriteString(c, "HTTP/1.1 503 cocoonbox egress proxy: the box holds too many connections open\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
			c.Close()
			if l.said.CompareAndSwap(false, true) {
				l.logf("egress proxy: the box at %s holds %d connections open: refusing more", ap.Addr(), l.max)
			}
			continue
		}
		return &countedConn{TCPConn: tc, l: l}, nil
	}
}

// countedConn is an accepted connection that counts in its listener's
// live ones until closed; *net.TCPConn's methods (CloseWrite, and
// ReadFrom and WriteTo, which splice) stay.
type countedConn struct {
	*net.TCPConn
	l    *peerListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.live.Add(-1) })
	return c.TCPConn.Close()
}

// proxyEnv adds to env box id's proxy settings (both spellings, as
// programs read either), when it has a proxy.
func (g *egressProxy) proxyEnv(id string, env map[string]string) {
	a := g.addr(id)
	if a == "" {
		return
	}
	u := "http://" + a
	no := "localhost,127.0.0.1,::1"
	for k, v := range map[string]string{"HTTP_PROXY": u, "HTTPS_PROXY": u, "NO_PROXY": no} {
		env[k] = v
		env[strings.ToLower(k)] = v
	}
}
