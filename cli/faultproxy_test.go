package cli_test

import (
	"net"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cocoonbox/cocoonbox/internal/faultproxy"
)

// proxies are the scripts' fault proxies, by script.
var proxies sync.Map // *testscript.TestScript -> *faultproxy.Proxy

// faultproxyCmd drives a fault proxy in front of the script's local box:
//
//	faultproxy start              proxy $BOX_PORT; COCOONBOX_ENDPOINT goes through it
//	faultproxy reset-every D      reset each connection D after it opened (0: stop)
//	faultproxy reset              reset every connection now
//	faultproxy freeze D | thaw    forward nothing for D, or end a freeze now
//	faultproxy outage D           reset everything and refuse connections for D
//	faultproxy stats              print accepted, resets and open counts
func faultproxyCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: faultproxy start|reset-every D|reset|freeze D|thaw|outage D|stats")
	}
	if args[0] == "start" {
		p, err := faultproxy.Listen("127.0.0.1:0", net.JoinHostPort("127.0.0.1", ts.Getenv("BOX_PORT")))
		ts.Check(err)
		ts.Defer(func() { p.Close() })
		proxies.Store(ts, p)
		_, port, _ := net.SplitHostPort(p.Addr())
		ep := ts.Getenv("COCOONBOX_ENDPOINT")
		ts.Setenv("COCOONBOX_ENDPOINT", strings.Replace(ep, ":"+ts.Getenv("BOX_PORT"), ":"+port, 1))
		ts.Setenv("PROXY_PORT", port)
		return
	}
	v, ok := proxies.Load(ts)
	if !ok {
		ts.Fatalf("faultproxy %s: no proxy; faultproxy start first", args[0])
	}
	p := v.(*faultproxy.Proxy)
	dur := func() time.Duration {
		if len(args) != 2 {
			ts.Fatalf("faultproxy %s DURATION", args[0])
		}
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		return d
	}
	switch args[0] {
	case "reset-every":
		p.ResetEvery(dur())
	case "reset":
		p.Reset()
	case "freeze":
		p.Freeze(dur())
	case "thaw":
		p.Thaw()
	case "outage":
		p.Outage(dur())
	case "stats":
		s := p.Stats()
		ts.Logf("faultproxy: %d accepted, %d reset, %d open", s.Accepted, s.Resets, s.Open)
	default:
		ts.Fatalf("faultproxy %s: unknown", args[0])
	}
}
