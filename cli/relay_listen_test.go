//go:build unix

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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
	"github.com/cocoonbox/cocoonbox/relay"
)

// TestRelayListen: a listener in a real local box (`cocoonbox-agent
// listen` over an Exec): a port the box chose, a connection to it taken
// with an Exec of its own (`take`) carrying bytes both ways, one
// rejected, the port closed once the listener is; a port in use, and
// boxes whose agent lacks the verb, each in one error.
func TestRelayListen(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("cocoonbox-agent")
	if err != nil {
		t.Fatal(err)
	}
	c := relayBox(t, filepath.Dir(bin))
	ctx := context.Background()

	t.Run("tcp", func(t *testing.T) {
		l, err := relay.Listen(ctx, c, localbox.DefaultBox, relay.ListenSpec{Mode: relay.ListenTCP, Host: "localhost"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if l.Port() == 0 {
			t.Fatal("no port chosen")
		}
		// The local box shares this machine's loopback: this client stands
		// for one in the box.
		addr := "127.0.0.1:" + strconv.Itoa(int(l.Port()))
		client, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		a, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if a.Host != "127.0.0.1" || a.Port != uint32(client.LocalAddr().(*net.TCPAddr).Port) {
			t.Errorf("accepted from %s:%d, want the client's %s", a.Host, a.Port, client.LocalAddr())
		}
		conn, err := a.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// 4 MiB each way at once, the laptop's half-close passed on.
		data := make([]byte, 4<<20)
		rand.Read(data)
		go func() {
			conn.Write(data)
			conn.CloseWrite()
		}()
		go io.Copy(client, client)
		h := sha256.New()
		if n, err := io.CopyN(h, conn, int64(len(data))); err != nil || !bytes.Equal(h.Sum(nil), sum(data)) {
			t.Errorf("echoed %d bytes (%v), want %d identical", n, err, len(data))
		}
		client.Close()
		if rest, err := io.ReadAll(conn); len(rest) != 0 || err != nil {
			t.Errorf("after the box's client closed: %q, %v; want EOF", rest, err)
		}

		// Rejected: the box's client sees its connection closed.
		c2, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		a2, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		a2.Reject()
		c2.SetReadDeadline(time.Now().Add(30 * time.Second))
		if n, err := c2.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			t.Errorf("a rejected connection: read %d, %v; want EOF", n, err)
		}
		if _, err := a2.Take(ctx); err == nil {
			t.Error("a rejected connection was taken")
		}

		l.Close()
		if _, err := l.Accept(); !errors.Is(err, relay.ErrListenerClosed) {
			t.Errorf("Accept after Close: %v, want ErrListenerClosed", err)
		}
		if c3, err := net.Dial("tcp", addr); err == nil {
			c3.Close()
			t.Errorf("after Close, %s still accepts", addr)
		}
	})

	t.Run("in use", func(t *testing.T) {
		used, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer used.Close()
		port := uint32(used.Addr().(*net.TCPAddr).Port)
		_, err = relay.Listen(ctx, c, localbox.DefaultBox, relay.ListenSpec{Mode: relay.ListenTCP, Host: "127.0.0.1", Port: port}, nil)
		de, ok := errors.AsType[*relay.DialError](err)
		if !ok || de.Reason != "address already in use" || de.Addr != "127.0.0.1:"+strconv.Itoa(int(port)) {
			t.Errorf("a port in use: %v; want a *relay.DialError naming it, address already in use", err)
		}
	})

	t.Run("unix", func(t *testing.T) {
		// A directory the box user may write in.
		dir := t.TempDir()
		os.Chmod(dir, 0o777)
		sock := filepath.Join(dir, "r.sock")
		l, err := relay.Listen(ctx, c, localbox.DefaultBox, relay.ListenSpec{Mode: relay.ListenUnix, Path: sock}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(sock); err != nil || fi.Mode().Perm() != 0o600 || l.Path() != sock {
			t.Errorf("socket %s: %v, %v; want 0600", l.Path(), fi, err)
		}
		l.Close()
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("after Close, the socket: %v; want it removed", err)
		}
	})

	// A box whose agent predates the verb (its usage line, exit 2), and
	// one without an agent (the shell's 127).
	for _, tc := range []struct{ name, script string }{
		{"old agent", "#!/bin/sh\necho '{\"ok\":false,\"code\":\"usage\",\"error\":\"unknown command\"}'\nexit 2\n"},
		{"no agent", "#!/bin/sh\necho 'sh: 1: cocoonbox-agent: not found' >&2\nexit 127\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "cocoonbox-agent"), tc.script)
			os.Chmod(filepath.Join(dir, "cocoonbox-agent"), 0o755)
			_, err := relay.Listen(ctx, relayBox(t, dir), localbox.DefaultBox, relay.ListenSpec{Mode: relay.ListenAgent}, nil)
			if !errors.Is(err, relay.ErrNoListener) || !strings.Contains(err.Error(), "box main") {
				t.Errorf("got %v, want ErrNoListener naming the box", err)
			}
		})
	}
	t.Run("no box", func(t *testing.T) {
		if _, err := relay.Listen(ctx, c, "nosuchbox", relay.ListenSpec{Mode: relay.ListenAgent}, nil); !errors.Is(err, box.ErrNotFound) {
			t.Errorf("got %v, want box.ErrNotFound", err)
		}
	})
}

// BenchmarkRelayListenAccept is one connection to a listener in the box
// until its first byte reaches this end: the accept line, the take's
// Exec, the descriptor's hand-over, the ready byte, the byte. Compare
// BenchmarkRelayDial, the forward direction's setup.
func BenchmarkRelayListenAccept(b *testing.B) {
	c := agentClient(b)
	l, err := relay.Listen(context.Background(), c, localbox.DefaultBox, relay.ListenSpec{Mode: relay.ListenTCP, Host: "127.0.0.1"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	addr := "127.0.0.1:" + strconv.Itoa(int(l.Port()))
	for b.Loop() {
		client, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		client.Write([]byte("x"))
		a, err := l.Accept()
		if err != nil {
			b.Fatal(err)
		}
		conn, err := a.Take(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, make([]byte, 1)); err != nil {
			b.Fatal(err)
		}
		client.Close()
		conn.Close()
	}
}
