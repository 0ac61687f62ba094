package cli_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"
)

// httpserve DIR serves DIR over HTTP and HTTPS (a self-signed
// certificate) on 127.0.0.2, an address of this machine no box reaches
// unless the owner allows it, for as long as the script runs; it sets
// HTTP_ADDR and HTTPS_ADDR to their HOST:PORT.
func httpserve(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: httpserve DIR")
	}
	h := http.FileServer(http.Dir(ts.MkAbs(args[0])))
	for _, v := range []string{"HTTP_ADDR", "HTTPS_ADDR"} {
		ln, err := net.Listen("tcp", "127.0.0.2:0")
		ts.Check(err)
		srv := httptest.NewUnstartedServer(h)
		srv.Listener.Close()
		srv.Listener = ln
		if v == "HTTPS_ADDR" {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		ts.Defer(srv.Close)
		ts.Setenv(v, ln.Addr().String())
	}
}

// upstreamproxy stands for the local box's own outbound proxy: on
// 127.0.0.1 (UPSTREAM is its HOST:PORT), it answers every CONNECT by
// tunnelling to HTTPS_ADDR (httpserve's), whatever the target, and
// appends each target to $WORK/upstream.log.
func upstreamproxy(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: upstreamproxy")
	}
	to := ts.Getenv("HTTPS_ADDR")
	if to == "" {
		ts.Fatalf("upstreamproxy: run httpserve first")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	ts.Defer(func() { ln.Close() })
	logPath := filepath.Join(ts.Getenv("WORK"), "upstream.log")
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil || req.Method != http.MethodConnect {
					return
				}
				mu.Lock()
				f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err == nil {
					fmt.Fprintf(f, "CONNECT %s\n", req.Host)
					f.Close()
				}
				mu.Unlock()
				s, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer s.Close()
				io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				go io.Copy(s, c)
				io.Copy(c, s)
			}()
		}
	}()
	ts.Setenv("UPSTREAM", ln.Addr().String())
}

// hostlisten ADDR VAR listens on ADDR (":0": every address of this
// machine, IPv4 and IPv6) for as long as the script runs, accepting and
// closing each connection, and sets VAR to its port: a service of the
// host that no box may reach.
func hostlisten(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: hostlisten ADDR VAR")
	}
	ln, err := net.Listen("tcp", args[0])
	ts.Check(err)
	ts.Defer(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ts.Setenv(args[1], strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
}
