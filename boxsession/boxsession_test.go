//go:build unix

package boxsession

import (
	"bufio"
	"bytes"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"
)

// holderIn serves a holder in dir for the test.
func holderIn(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	if err := privateDir(dir); err != nil {
		t.Fatal(err)
	}
	lis, err := unixsock.Listen(filepath.Join(dir, "holder.sock"))
	if err != nil {
		t.Fatal(err)
	}
	h := &Holder{Bound: 64 << 10, Logf: t.Logf}
	go h.Serve(lis)
	t.Cleanup(func() { lis.Close() })
	return dir
}

// client is one attachment seen from the client: frames in, frames out.
type client struct {
	in  *io.PipeWriter
	out *bufio.Reader
	res chan error
}

func open(t *testing.T, dir, op, id, line string) *client {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &client{in: inW, out: bufio.NewReader(outR), res: make(chan error, 1)}
	go func() {
		var err error
		if op == "open" {
			err = Open(dir, "/nonexistent", nil, id, time.Minute, line, inR, outW)
		} else {
			err = Attach(dir, "/nonexistent", nil, id, inR, outW)
		}
		outW.CloseWithError(io.EOF)
		c.res <- err
	}()
	return c
}

func (c *client) send(f sessionwire.Frame) {
	c.in.Write(sessionwire.Append(nil, f))
}

// A session's output survives its attachment: the second attachment
// resumes from the offsets it names, stdin sent twice reaches the command
// once, and the exit comes once the output has.
func TestResume(t *testing.T) {
	dir := holderIn(t)
	c := open(t, dir, "open", "s1", "cat; echo done >&2; exit 7")
	c.send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Off: 0, Data: []byte("hello ")})
	var out bytes.Buffer
	for out.Len() < 6 {
		f, err := sessionwire.Read(c.out)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == sessionwire.Data && f.Stream == sessionwire.Stdout {
			out.Write(f.Data)
		}
	}
	// The link goes; the client comes back having seen 3 bytes only.
	c.in.Close()
	<-c.res
	c = open(t, dir, "attach", "s1", "")
	c.send(sessionwire.Frame{Type: sessionwire.Resume, Off: 3})
	// Stdin again from 0: the command gets only what is new.
	c.send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Off: 0, Data: []byte("hello world\n")})
	c.send(sessionwire.Frame{Type: sessionwire.EOF, Stream: sessionwire.Stdin, Off: 12})
	out.Truncate(3)
	var errb bytes.Buffer
	for {
		f, err := sessionwire.Read(c.out)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == sessionwire.Data {
			want := uint64(out.Len())
			w := &out
			if f.Stream == sessionwire.Stderr {
				want, w = uint64(errb.Len()), &errb
			}
			if f.Off != want {
				t.Fatalf("stream %d at %d, want %d", f.Stream, f.Off, want)
			}
			w.Write(f.Data)
		}
		if f.Type == sessionwire.Exit {
			if f.Code != 7 {
				t.Errorf("exit %+v", f)
			}
			break
		}
	}
	if out.String() != "hello world\n" || errb.String() != "done\n" {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
	c.send(sessionwire.Frame{Type: sessionwire.Bye})
	if err := <-c.res; err != nil {
		t.Errorf("attach: %v", err)
	}
	c = open(t, dir, "attach", "s1", "")
	f, err := sessionwire.Read(c.out)
	if err != nil || f.Type != sessionwire.Fail {
		t.Errorf("attach after bye: %+v %v, want fail", f, err)
	}
}
