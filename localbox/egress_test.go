package localbox

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// A rule's name covers the name and its subdomains, never a name that
// only ends with it; an address or CIDR entry covers addresses only.
func TestEgressMatchHost(t *testing.T) {
	entries := []string{"example.com", "*.example.org", "10.1.0.0/16", "127.0.0.2"}
	for host, want := range map[string]bool{
		"example.com":       true,
		"API.Example.com.":  true,
		"badexample.com":    false,
		"example.org":       true,
		"a.b.example.org":   true,
		"10.1.2.3":          true,
		"10.2.0.1":          false,
		"127.0.0.2":         true,
		"[::ffff:10.1.0.9]": true,
		"10.1.example.com":  true,
		"other.test":        false,
	} {
		if got := matchHost(entries, host); got != want {
			t.Errorf("matchHost(%q) = %v, want %v", host, got, want)
		}
	}
	for _, bad := range []string{"", "a b", "http://example.com", "example.com:443", "*"} {
		if CheckEgressHost(bad) == nil {
			t.Errorf("CheckEgressHost(%q) took it", bad)
		}
	}
}

// An address or CIDR entry of Deny refuses a destination in it however
// the box names it: by the address, and by a name that resolves to it
// (a deny by CIDR was walked around with any DNS name pointing there).
func TestEgressDenyResolved(t *testing.T) {
	serve := func(addr string) string {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached") })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		return port
	}
	denied, other := serve("127.0.0.1:0"), serve("127.0.0.5:0")
	g := newEgressProxy(Egress{Allow: []string{"localhost", "127.0.0.0/8"}, Deny: []string{"127.0.0.1"}}, 0, func(string) string { return "" }, t.Logf)
	defer g.close()
	addr, err := g.listen("b", netip.MustParseAddr("127.0.0.1"), netip.MustParsePrefix("127.0.0.0/8"))
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse("http://" + addr)
	// The box: an address of the proxy's network other than its gateway.
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DialContext: d.DialContext, DisableKeepAlives: true}}
	get := func(u string) (int, string) {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://127.0.0.5:" + other + "/"); code != 200 || body != "reached" {
		t.Fatalf("an allowed address: %d %q, want 200 reached", code, body)
	}
	for _, u := range []string{"http://127.0.0.1:" + denied + "/", "http://localhost:" + denied + "/"} {
		if code, body := get(u); code != http.StatusForbidden || !strings.Contains(body, "denied") {
			t.Errorf("%s: %d %q, want 403 denied", u, code, body)
		}
	}
}

// A box holds at most maxConns connections open to its proxy: the next
// is answered 503 and closed (4000 idle ones cost the local box 4000
// descriptors and 80 MB, without end); one closed frees its place.
func TestEgressConnLimit(t *testing.T) {
	g := newEgressProxy(Egress{}, 0, func(string) string { return "" }, t.Logf)
	g.maxConns = 3
	defer g.close()
	addr, err := g.listen("b", netip.MustParseAddr("127.0.0.1"), netip.MustParsePrefix("127.0.0.0/8"))
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
	// ask sends a request on a new connection and gives its answer's
	// status; the connection stays open.
	ask := func() (net.Conn, int) {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return c, resp.StatusCode
	}
	var held []net.Conn
	for range 3 {
		c, code := ask()
		if code != http.StatusForbidden {
			t.Fatalf("connection %d: %d, want the 403 of a refused host", len(held)+1, code)
		}
		held = append(held, c)
	}
	c, code := ask()
	c.Close()
	if code != http.StatusServiceUnavailable {
		t.Fatalf("a fourth connection: %d, want 503", code)
	}
	held[0].Close()
	for {
		c, code := ask()
		c.Close()
		if code == http.StatusForbidden {
			break
		}
	}
	for _, c := range held[1:] {
		c.Close()
	}
}

// A cloud's metadata service is refused at its every address, also
// those that are not link-local (AWS's IPv6 one, Alibaba Cloud's), and
// in an address's other spellings.
func TestEgressGuardMetadata(t *testing.T) {
	g := newEgressProxy(Egress{}, 0, func(string) string { return "" }, t.Logf)
	for _, a := range []string{"169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "100.100.100.200", "::ffff:100.100.100.200", "127.1.2.3", "::1", "0.0.0.0", "::"} {
		if g.guard(netip.MustParseAddr(a)) == nil {
			t.Errorf("guard(%s) let it through", a)
		}
	}
}
