package box_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// client starts a local box on a unix socket in this process (or, with
// tlsOn, on https://127.0.0.1 with a self-signed certificate) and returns a
// client for it.
func client(tb testing.TB, tlsOn ...bool) *box.Client {
	tb.Helper()
	return clientWith(tb, len(tlsOn) > 0 && tlsOn[0])
}

func clientWith(tb testing.TB, tlsOn bool, opts ...box.DialOption) *box.Client {
	tb.Helper()
	return clientIn(tb, tlsOn, "", opts...)
}

// clientIn is clientWith with binDir first on the PATH of the box's
// commands (localbox.Server.BinDir).
func clientIn(tb testing.TB, tlsOn bool, binDir string, opts ...box.DialOption) *box.Client {
	tb.Helper()
	dir := tb.TempDir()
	srv := &localbox.Server{Dir: dir, BinDir: binDir}
	lis, url, err := localbox.Listen(dir, "")
	var ca string
	if tlsOn {
		lis, url, err = localbox.ListenTLS("127.0.0.1:0", "127.0.0.1")
		if err == nil {
			var key string
			ca, key, _, err = localbox.SelfSigned(dir, []string{"127.0.0.1"})
			if err == nil {
				srv.TLS, err = localbox.LoadTLS(ca, key)
			}
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := localbox.IssueToken(dir, "bench", "cli")
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Serve(lis)
	tb.Cleanup(srv.Stop)
	ep, err := box.ParseEndpoint(url)
	if err != nil {
		tb.Fatal(err)
	}
	ep.CAFile = ca
	c, err := box.Dial(ep, tok, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// loop runs op b.N times and reports the CPU used per op.
func loop(b *testing.B, op func()) {
	c0 := cpuTime()
	n := 0
	for b.Loop() {
		op()
		n++
	}
	b.ReportMetric(float64((cpuTime()-c0).Milliseconds())/float64(n), "cpu-ms/op")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

const streamSize = 256 << 20

// BenchmarkExecDownload measures the server-to-client direction: the box
// writes streamSize bytes, the client discards them. Client and server run
// in this process, so a CPU profile shows both halves.
func BenchmarkExecDownload(b *testing.B) {
	c := client(b)
	b.SetBytes(streamSize)
	loop(b, func() {
		var out counter
		st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: fmt.Sprintf("head -c %d /dev/zero", streamSize), Stdout: &out})
		if err != nil || st.Code != 0 {
			b.Fatal(st, err)
		}
		if out.n != streamSize {
			b.Fatalf("got %d bytes, want %d", out.n, streamSize)
		}
	})
}

// BenchmarkExecDownloadTLS is BenchmarkExecDownload over TLS on loopback
// TCP: the cost of the cipher and the socket on top of the stream.
func BenchmarkExecDownloadTLS(b *testing.B) {
	c := client(b, true)
	b.SetBytes(streamSize)
	loop(b, func() {
		var out counter
		st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: fmt.Sprintf("head -c %d /dev/zero", streamSize), Stdout: &out})
		if err != nil || st.Code != 0 || out.n != streamSize {
			b.Fatal(st, err, out.n)
		}
	})
}

// BenchmarkExecStartup is one `true` through a plain Exec.
func BenchmarkExecStartup(b *testing.B) {
	c := client(b)
	loop(b, func() {
		st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: "true"})
		if err != nil || st.Code != 0 {
			b.Fatal(st, err)
		}
	})
}

// BenchmarkExecUpload measures the client-to-server direction.
func BenchmarkExecUpload(b *testing.B) {
	c := client(b)
	b.SetBytes(streamSize)
	loop(b, func() {
		var out counter
		st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: "wc -c", Stdin: io.LimitReader(zeros{}, streamSize), Stdout: &out})
		if err != nil || st.Code != 0 {
			b.Fatal(st, err)
		}
	})
}
