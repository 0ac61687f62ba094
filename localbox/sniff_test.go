package localbox_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// A connection that sends nothing holds up neither gRPC nor HTTP on the
// shared port.
func TestSniffSilentConnection(t *testing.T) {
	base, dir := serve(t)
	silent, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	tok, _ := localbox.IssueToken(dir, "t", "cli")
	if _, err := dial(t, base, tok).List(t.Context()); err != nil {
		t.Fatalf("gRPC beside a silent connection: %v", err)
	}
	signIn(t, base, dir)
}

// plainAddr hides that a listener is TCP, so that Serve does not split it:
// the benchmark's baseline.
type plainAddr struct{ net.Listener }

type addr struct{ net.Addr }

func (l plainAddr) Addr() net.Addr { return addr{l.Listener.Addr()} }

// BenchmarkExecThroughput pushes 32 MiB through `cat` in a box and back:
// over loopback TCP split by the sniffer, over loopback TCP straight to
// gRPC, and over the unix socket.
func BenchmarkExecThroughput(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 2<<20)
	for _, kind := range []string{"tcp-shared", "tcp-grpc-only", "unix"} {
		b.Run(kind, func(b *testing.B) {
			dir := b.TempDir()
			listen := "127.0.0.1:0"
			if kind == "unix" {
				listen = "unix:" + filepath.Join(dir, "s")
			}
			lis, u, err := localbox.Listen(dir, listen)
			if err != nil {
				b.Fatal(err)
			}
			if kind == "tcp-grpc-only" {
				lis = plainAddr{lis}
			}
			srv := &localbox.Server{Dir: dir}
			go srv.Serve(lis)
			defer srv.Stop()
			tok, _ := localbox.IssueToken(dir, "b", "cli")
			ep, _ := box.ParseEndpoint(u)
			c, _ := box.Dial(ep, tok)
			defer c.Close()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var n countWriter
				st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: "cat", Stdin: bytes.NewReader(data), Stdout: &n, Stderr: io.Discard})
				if err != nil || st.Code != 0 || int(n) != len(data) {
					b.Fatalf("exec: %v %+v, %d bytes", err, st, n)
				}
			}
		})
	}
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }
