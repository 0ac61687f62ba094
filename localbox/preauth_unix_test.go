//go:build unix

package localbox_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// floodSize is how many connections TestAnonConnsCapped opens that never
// present a token.
const floodSize = 2000

// 2,000 connections that never present a token, from one source and from
// a hundred, each a bare TCP connection, a finished TLS handshake or one
// followed by the HTTP/2 preface, all held open: the server keeps no more
// than its caps (as it counts them, and as the kernel does). A command
// with a valid token that starts half-way through the flood streams
// through it and after it, and one started once all 2,000 are open runs
// at once.
func TestAnonConnsCapped(t *testing.T) {
	raiseNoFile(t, 2*floodSize+1000)
	// Only the caps close connections here.
	srv := &localbox.Server{Logf: t.Logf, AnonIdle: 10 * time.Minute}
	addr, cert := startTLS(t, srv)
	tok, err := localbox.IssueToken(srv.Dir, "t", "cli")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := box.ParseEndpoint("https://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	ep.CAFile = cert
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)

	many := make([]net.IP, 100)
	for i := range many {
		many[i] = net.IPv4(127, 0, 1, byte(i+1))
	}
	for _, tc := range []struct {
		name    string
		sources []net.IP
		cap     int
	}{
		// The command dials from 127.0.0.1, a source of its own (the
		// flood's own source is TestAnonFloodSpareClients').
		{"one source", []net.IP{net.IPv4(127, 0, 0, 2)}, localbox.DefaultAnonConnsPerSource},
		{"100 sources", many, localbox.DefaultAnonConns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needLoopback(t, tc.sources[len(tc.sources)-1].String())
			half := make(chan struct{})
			flooded := make(chan floodResult, 1)
			go func() {
				conns, failed := flood(t, addr, cert, tc.sources, half)
				flooded <- floodResult{conns, failed}
			}()
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			<-half

			// A command that starts while the flood goes on, and streams
			// until after it: each line sent comes back.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			c, err := box.Dial(ep, tok)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			type result struct {
				st  box.ExitStatus
				err error
			}
			done := make(chan result, 1)
			go func() {
				st, err := c.Exec(ctx, &box.Command{Box: localbox.DefaultBox, Line: "while read l; do echo got $l; done", Stdin: inR, Stdout: outW, Stderr: io.Discard})
				outW.Close()
				done <- result{st, err}
			}()
			lines := bufio.NewReader(outR)
			echo := func(n int) {
				t.Helper()
				if _, err := fmt.Fprintf(inW, "%d\n", n); err != nil {
					t.Fatalf("send line %d: %v", n, err)
				}
				got, err := lines.ReadString('\n')
				if want := fmt.Sprintf("got %d\n", n); got != want || err != nil {
					t.Fatalf("line %d came back as %q, %v; want %q", n, got, err, want)
				}
			}
			echo(1)
			fr := <-flooded
			held = fr.conns
			t.Logf("%d connections opened and held, %d refused or cut during the handshake", len(fr.conns), fr.failed)
			echo(2)

			// A command started once all of them are open.
			var out bytes.Buffer
			st, err := c.Exec(ctx, &box.Command{Box: localbox.DefaultBox, Line: "echo ran", Stdout: &out, Stderr: io.Discard})
			if err != nil || st.Code != 0 || out.String() != "ran\n" {
				t.Fatalf("a command beside %d connections without a token: %v, %+v, %q", floodSize, err, st, out.String())
			}
			echo(3)
			inW.Close()
			if r := <-done; r.err != nil || r.st.Code != 0 {
				t.Errorf("the streaming command beside the flood ended with %v, %+v; want exit 0", r.err, r.st)
			}

			if n := srv.AnonConnsOpen(); n > tc.cap {
				t.Errorf("the server holds %d connections without a valid token; want at most %d", n, tc.cap)
			}
			// The kernel's count, whatever the server believes: the
			// command's own connection is the one more allowed.
			if n, ok := establishedTo(t, port); ok && n > tc.cap+1 {
				t.Errorf("the server has %d connections open; want at most %d", n, tc.cap+1)
			} else if ok {
				t.Logf("the server has %d connections open", n)
			}
		})
	}
}

type floodResult struct {
	conns  []net.Conn
	failed int
}

// flood opens floodSize connections to addr, from each source in turn,
// closes half once half of them are open, and returns those it kept and
// how many failed.
func flood(t *testing.T, addr, certFile string, sources []net.IP, half chan<- struct{}) ([]net.Conn, int) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	h2 := trusting(t, certFile)
	h2.NextProtos = []string{"h2"}
	h2.ServerName = "127.0.0.1"
	var (
		mu     sync.Mutex
		conns  []net.Conn
		failed atomic.Int32
		next   atomic.Int32
		done   atomic.Int32
		once   sync.Once
		wg     sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= floodSize || ctx.Err() != nil {
					return
				}
				if done.Add(1) >= floodSize/2 {
					once.Do(func() { close(half) })
				}
				d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: sources[i%len(sources)]}}
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					failed.Add(1)
					continue
				}
				if i%3 != 0 {
					tc := tls.Client(c, h2)
					tc.SetDeadline(time.Now().Add(5 * time.Second))
					err = tc.HandshakeContext(ctx)
					if err == nil && i%3 == 2 {
						_, err = tc.Write([]byte(h2Preface))
					}
					tc.SetDeadline(time.Time{})
					if err != nil {
						c.Close()
						failed.Add(1)
						continue
					}
					c = tc
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	once.Do(func() { close(half) })
	return conns, int(failed.Load())
}

// establishedTo counts the established TCP connections whose local port
// is port, from Linux's /proc/net/tcp and tcp6; ok is false elsewhere.
func establishedTo(t *testing.T, port int) (n int, ok bool) {
	t.Helper()
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, false
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st ...
			fs := strings.Fields(sc.Text())
			if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "01" {
				n++
			}
		}
	}
	return n, true
}

// raiseNoFile makes sure this process may open n descriptors: it raises
// the soft limit, and as root the hard one too; a hard limit below n
// that it may not raise fails the test.
func raiseNoFile(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		if os.Geteuid() != 0 {
			t.Fatalf("RLIMIT_NOFILE's hard limit is %d; this test needs %d (raise it, or run as root, which raises it)", lim.Max, n)
		}
		lim.Max = n
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
}

// A flood of short connections from one source, by the thousand, most
// closed at once, some held silent or after a line for a moment, and
// beside it clients from that same source
// with a valid token: raw gRPC calls, each on a new connection, and the
// client's own dial and list (`boxes list`). Each client's connection is
// anonymous until its first call arrives, and a full cap of its source
// closed the oldest anonymous one: before, 13 to 23 of 30 raw calls and
// 1 to 8 of 20 lists failed so. Now a connection whose peer has gone,
// or that has sent nothing, goes before one that talks, and every call
// with a token is served; the flood stays within the cap.
func TestAnonFloodSpareClients(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "TLS"}[useTLS], func(t *testing.T) {
			srv := &localbox.Server{Logf: func(string, ...any) {}}
			var addr, cert string
			if useTLS {
				addr, cert = startTLS(t, srv)
			} else {
				srv.Dir = t.TempDir()
				lis, _, err := localbox.Listen(srv.Dir, "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				run(t, srv, lis)
				addr = lis.Addr().String()
			}
			tok, err := localbox.IssueToken(srv.Dir, "t", "cli")
			if err != nil {
				t.Fatal(err)
			}
			ep, err := box.ParseEndpoint(map[bool]string{false: "http://", true: "https://"}[useTLS] + addr)
			if err != nil {
				t.Fatal(err)
			}
			ep.CAFile = cert
			creds := insecure.NewCredentials()
			if useTLS {
				creds = credentials.NewTLS(trusting(t, cert))
			}

			ctx, cancel := context.WithCancel(t.Context())
			var flooders sync.WaitGroup
			var opened atomic.Int64
			for f := range 8 {
				flooders.Go(func() {
					for ctx.Err() == nil {
						c, err := net.Dial("tcp", addr)
						if err != nil {
							continue
						}
						opened.Add(1)
						// Most go at once; some stay silent a moment, some
						// send a line first.
						switch f {
						case 0:
							time.Sleep(20 * time.Millisecond)
						case 1:
							c.Write([]byte("GET / HTTP/1.1\r\n"))
							time.Sleep(20 * time.Millisecond)
						}
						c.Close()
					}
				})
			}
			defer func() {
				cancel()
				flooders.Wait()
			}()

			var failed []string
			for i := range 30 {
				cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
				if err != nil {
					t.Fatal(err)
				}
				_, err = controlv1.NewBoxesClient(cc).List(bearer(t.Context(), tok), &controlv1.ListRequest{})
				cc.Close()
				if err != nil {
					failed = append(failed, fmt.Sprintf("raw call %d: %v", i+1, err))
				}
			}
			for i := range 20 {
				c, err := box.Dial(ep, tok)
				if err == nil {
					_, err = c.List(t.Context())
					c.Close()
				}
				if err != nil {
					failed = append(failed, fmt.Sprintf("list %d: %v", i+1, err))
				}
			}
			t.Logf("%d connections of the flood opened meanwhile", opened.Load())
			if len(failed) > 0 {
				t.Errorf("%d of 50 clients with a valid token failed beside the flood:\n%s", len(failed), strings.Join(failed, "\n"))
			}
			if n := srv.AnonConnsOpen(); n > localbox.DefaultAnonConnsPerSource {
				t.Errorf("the server holds %d connections without a valid token; want at most %d", n, localbox.DefaultAnonConnsPerSource)
			}
		})
	}
}
