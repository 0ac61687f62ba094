package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/loopback"
	"github.com/cocoonbox/cocoonbox/localbox"
	"github.com/cocoonbox/cocoonbox/relay"
)

// relayBox starts a local box whose PATH starts with binDir and returns a
// client of it.
func relayBox(t testing.TB, binDir string) *box.Client {
	t.Helper()
	tb := startBoxWith(t, binDir)
	ep, err := box.ParseEndpoint(tb.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := box.Dial(ep, tb.Token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// answerAtEOF reads to the client's EOF, then answers "got:" and the bytes.
func answerAtEOF(c net.Conn) {
	b, _ := io.ReadAll(c)
	c.Write(append([]byte("got:"), b...))
}

// echo copies back what it reads and half-closes at EOF.
func echo(c net.Conn) {
	io.Copy(c, c)
	c.(*net.TCPConn).CloseWrite()
}

func TestRelayDial(t *testing.T) {
	bin, err := exec.LookPath("cocoonbox-agent")
	if err != nil {
		t.Fatal(err)
	}
	agentBox := relayBox(t, filepath.Dir(bin))
	// A box whose agent predates the relay verb: it answers an unknown verb
	// as every cocoonbox-agent does, one JSON line and exit 2, so the
	// relay must fall back to the box's python3.
	old := t.TempDir()
	write(t, filepath.Join(old, "cocoonbox-agent"), "#!/bin/sh\necho '{\"ok\":false,\"code\":\"usage\",\"error\":\"unknown command\"}'\nexit 2\n")
	os.Chmod(filepath.Join(old, "cocoonbox-agent"), 0o755)
	oldBox := relayBox(t, old)
	// A box with no agent: what /bin/sh (dash) says and exits for a
	// command it cannot find.
	none := t.TempDir()
	write(t, filepath.Join(none, "cocoonbox-agent"), "#!/bin/sh\necho 'sh: 1: cocoonbox-agent: not found' >&2\nexit 127\n")
	os.Chmod(filepath.Join(none, "cocoonbox-agent"), 0o755)
	noneBox := relayBox(t, none)
	ctx := context.Background()

	for _, b := range []struct {
		name string
		c    *box.Client
	}{{"agent", agentBox}, {"python3", oldBox}, {"no agent", noneBox}} {
		t.Run(b.name+"/half-close", func(t *testing.T) {
			host, port := loopback.TCP(t, answerAtEOF)
			c, err := relay.Dial(ctx, b.c, localbox.DefaultBox, host, port)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "hello")
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil || string(got) != "got:hello" {
				t.Errorf("read %q, %v; want got:hello, EOF", got, err)
			}
		})
		t.Run(b.name+"/both-ways", func(t *testing.T) {
			// 16 MiB each way at once: more than every buffer on the path,
			// so a relay that read only one direction at a time would stall.
			host, port := loopback.TCP(t, echo)
			c, err := relay.Dial(ctx, b.c, localbox.DefaultBox, host, port)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			data := make([]byte, 16<<20)
			rand.Read(data)
			go func() {
				c.Write(data)
				c.CloseWrite()
			}()
			h := sha256.New()
			n, err := io.Copy(h, c)
			if err != nil || n != int64(len(data)) || !bytes.Equal(h.Sum(nil), sum(data)) {
				t.Errorf("echoed %d bytes (%v), want %d identical", n, err, len(data))
			}
		})
		t.Run(b.name+"/refused", func(t *testing.T) {
			l, _ := net.Listen("tcp", "127.0.0.1:0")
			port := uint32(l.Addr().(*net.TCPAddr).Port)
			l.Close()
			_, err := relay.Dial(ctx, b.c, localbox.DefaultBox, "127.0.0.1", port)
			de, ok := errors.AsType[*relay.DialError](err)
			if !ok || strings.ToLower(de.Reason) != "connection refused" {
				t.Errorf("got %v, want a *relay.DialError saying connection refused", err)
			}
		})
	}

	t.Run("close", func(t *testing.T) {
		// Close ends the box half: the target sees its connection end.
		ended := make(chan struct{})
		host, port := loopback.TCP(t, func(c net.Conn) {
			io.WriteString(c, "hi")
			io.Copy(io.Discard, c)
			close(ended)
		})
		c, err := relay.Dial(ctx, agentBox, localbox.DefaultBox, host, port)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
			t.Fatalf("read %q, %v", buf, err)
		}
		c.Close()
		<-ended
		if _, err := c.Write([]byte("x")); err == nil {
			t.Error("write after Close succeeded")
		}
	})
	t.Run("bad host", func(t *testing.T) {
		if _, err := relay.Dial(ctx, agentBox, localbox.DefaultBox, "a;reboot", 80); err == nil || !strings.Contains(err.Error(), "bad host") {
			t.Errorf("got %v, want bad host", err)
		}
	})
	t.Run("no box", func(t *testing.T) {
		if _, err := relay.Dial(ctx, agentBox, "nosuchbox", "127.0.0.1", 80); err == nil || !errors.Is(err, box.ErrNotFound) {
			t.Errorf("got %v, want box.ErrNotFound", err)
		}
	})
}

func sum(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

// agentClient is a client of a local box with our agent.
func agentClient(b *testing.B) *box.Client {
	bin, err := exec.LookPath("cocoonbox-agent")
	if err != nil {
		b.Fatal(err)
	}
	return relayBox(b, filepath.Dir(bin))
}

// BenchmarkRelayDial is one connection's setup and teardown through the
// box's agent: the Exec, the connect, the ready byte.
func BenchmarkRelayDial(b *testing.B) {
	c := agentClient(b)
	host, port := loopback.TCP(b, func(net.Conn) {})
	for b.Loop() {
		rc, err := relay.Dial(context.Background(), c, localbox.DefaultBox, host, port)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, rc)
		rc.Close()
	}
}

// BenchmarkRelayDownload moves 256 MiB from a target in the box to here.
func BenchmarkRelayDownload(b *testing.B) {
	c := agentClient(b)
	const size = 256 << 20
	chunk := make([]byte, 1<<20)
	host, port := loopback.TCP(b, func(conn net.Conn) {
		for range size / len(chunk) {
			conn.Write(chunk)
		}
	})
	b.SetBytes(size)
	for b.Loop() {
		rc, err := relay.Dial(context.Background(), c, localbox.DefaultBox, host, port)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, rc); err != nil || n != size {
			b.Fatalf("got %d bytes, %v", n, err)
		}
		rc.Close()
	}
}
