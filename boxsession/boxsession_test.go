//go:build unix

package boxsession

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"
)

// holderIn serves a holder in dir for the test, with a bound of 64 KiB.
func holderIn(t *testing.T) string {
	t.Helper()
	return holderBound(t, 64<<10)
}

// holderBound is holderIn with the holder's Bound.
func holderBound(t *testing.T, bound int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	if err := privateDir(dir); err != nil {
		t.Fatal(err)
	}
	lis, err := unixsock.Listen(filepath.Join(dir, "holder.sock"))
	if err != nil {
		t.Fatal(err)
	}
	h := &Holder{Bound: bound, Logf: t.Logf}
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

// fileClient is one attachment whose stdin and stdout are real pipes, as
// an Exec's are: they ride to the holder, which reads and writes them
// itself. Closing in and out is the Exec's end (a cut).
type fileClient struct {
	in  *os.File
	out *bufio.Reader
	rd  *os.File
	res chan error
}

func openFiles(t *testing.T, dir, op, id, line string) *fileClient {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &fileClient{in: inW, out: bufio.NewReader(outR), rd: outR, res: make(chan error, 1)}
	go func() {
		var err error
		if op == "open" {
			err = Open(dir, "/nonexistent", nil, id, time.Minute, line, inR, outW)
		} else {
			err = Attach(dir, "/nonexistent", nil, id, inR, outW)
		}
		inR.Close()
		outW.Close()
		c.res <- err
	}()
	return c
}

func (c *fileClient) send(f sessionwire.Frame) {
	c.in.Write(sessionwire.Append(nil, f))
}

// toExit reads c's frames up to the command's exit, then says bye and
// waits for the attachment's end: the command's output (both streams),
// how many acknowledgements of stdin came, the last one's offset, and the
// exit frame.
func (c *fileClient) toExit(t *testing.T) (out []byte, acks int, acked uint64, exit sessionwire.Frame) {
	t.Helper()
	for {
		f, err := sessionwire.Read(c.out)
		if err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case sessionwire.Data:
			out = append(out, f.Data...)
		case sessionwire.Ack:
			acks++
			acked = f.Off
		case sessionwire.Exit:
			c.send(sessionwire.Frame{Type: sessionwire.Bye})
			<-c.res
			return out, acks, acked, f
		}
	}
}

// cut ends the attachment as a reset stream does: its pipes close.
func (c *fileClient) cut() {
	c.in.Close()
	c.rd.Close()
}

// With the Exec's streams passed to the holder, a session takes 1 MiB of
// stdin through a 64 KiB ring (the holder waits for the command while it
// is full), survives a cut of those streams, and the second attachment
// resumes its output from the offset it names, the exit after it.
func TestResumeFiles(t *testing.T) {
	dir := holderIn(t)
	c := openFiles(t, dir, "open", "f1", "head -c 1048576 | wc -c; read x; echo after $x; exit 5")
	in := make([]byte, 1<<20)
	for off := 0; off < len(in); off += 100 << 10 {
		end := min(off+100<<10, len(in))
		c.send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Off: uint64(off), Data: in[off:end]})
	}
	// wc's count comes once all of it was written to the command; the
	// holder acknowledges stdin as it goes, inAckEvery at a time.
	var out bytes.Buffer
	var acked uint64
	for !bytes.Contains(out.Bytes(), []byte("\n")) {
		f, err := sessionwire.Read(c.out)
		if err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case sessionwire.Data:
			out.Write(f.Data)
		case sessionwire.Ack:
			acked = f.Off
		}
	}
	if out.String() != "1048576\n" {
		t.Fatalf("wc says %q", out.String())
	}
	// Acknowledged in steps of inAckEvery: all but the last step's rest.
	for acked+inAckEvery <= 1<<20 {
		f, err := sessionwire.Read(c.out)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == sessionwire.Ack {
			acked = f.Off
		}
	}
	// The cut: the Exec's streams close; the attacher returns.
	c.cut()
	if err := <-c.res; err != nil {
		t.Logf("attach after the cut: %v", err)
	}
	// Back with 3 bytes of the output, and a stdin line from the start
	// of what the box has not acknowledged (all of it, as far as we say).
	c = openFiles(t, dir, "attach", "f1", "")
	c.send(sessionwire.Frame{Type: sessionwire.Resume, Off: 3})
	c.send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Off: 1 << 20, Data: []byte("x\n")})
	c.send(sessionwire.Frame{Type: sessionwire.EOF, Stream: sessionwire.Stdin, Off: 1<<20 + 2})
	out.Truncate(3)
	for {
		f, err := sessionwire.Read(c.out)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == sessionwire.Data {
			if f.Off != uint64(out.Len()) {
				t.Fatalf("stdout at %d, want %d", f.Off, out.Len())
			}
			out.Write(f.Data)
		}
		if f.Type == sessionwire.Exit {
			if f.Code != 5 {
				t.Errorf("exit %+v", f)
			}
			break
		}
	}
	if out.String() != "1048576\nafter x\n" {
		t.Errorf("stdout %q", out.String())
	}
	c.send(sessionwire.Frame{Type: sessionwire.Bye})
	if err := <-c.res; err != nil {
		t.Errorf("attach: %v", err)
	}
}

// runLine opens a session of line and reads it to its exit: its stdout,
// stderr and exit code.
func runLine(t *testing.T, dir, id, line string) (string, string, int32) {
	t.Helper()
	c := open(t, dir, "open", id, line)
	c.send(sessionwire.Frame{Type: sessionwire.EOF, Stream: sessionwire.Stdin})
	var out, errb bytes.Buffer
	for {
		f, err := sessionwire.Read(c.out)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		switch f.Type {
		case sessionwire.Data:
			if f.Stream == sessionwire.Stderr {
				errb.Write(f.Data)
			} else {
				out.Write(f.Data)
			}
		case sessionwire.Exit:
			c.send(sessionwire.Frame{Type: sessionwire.Bye})
			<-c.res
			return out.String(), errb.String(), f.Code
		}
	}
}

// A line that is one program and its words starts without a shell of
// the holder's; anything else a shell must do (a builtin, an expansion,
// a list, a script without #!, a missing program) still goes to the
// shell, with the shell's result. The shell here is a bash that leaves a
// mark each time it runs.
func TestDirectStart(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Fatal("this test needs /bin/bash: ", err)
	}
	tmp := t.TempDir()
	mark := filepath.Join(tmp, "shell-ran")
	shell := filepath.Join(tmp, "bash")
	if err := os.WriteFile(shell, []byte("#!/bin/bash\necho >>"+mark+"\nexec -a bash /bin/bash \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHELL", shell)
	t.Setenv("_", "before")
	script := filepath.Join(tmp, "script")
	if err := os.WriteFile(script, []byte("echo from-script\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := holderIn(t)
	for i, tc := range []struct {
		line, out string
		code      int32
		direct    bool
	}{
		{"printenv _", "/usr/bin/printenv\n", 0, true},
		{"/usr/bin/printf '%s|' 'a b;$x' c", "a b;$x|c|", 0, true},
		{"true", "", 0, true},
		{"false", "", 1, true},
		{"echo $HOME", os.Getenv("HOME") + "\n", 0, false},
		{"exit 3", "", 3, false},
		{"echo a; echo b", "a\nb\n", 0, false},
		{script, "from-script\n", 0, false},
		{"no-such-program-here", "", 127, false},
	} {
		os.Remove(mark)
		out, _, code := runLine(t, dir, "d"+strconv.Itoa(i), tc.line)
		if out != tc.out || code != tc.code {
			t.Errorf("%s: stdout %q, exit %d; want %q, %d", tc.line, out, code, tc.out, tc.code)
		}
		if _, err := os.Stat(mark); (err == nil) == tc.direct {
			t.Errorf("%s: a shell ran: %v, want %v", tc.line, err == nil, !tc.direct)
		}
	}
}

func TestTermName(t *testing.T) {
	for s, want := range map[string]bool{
		"xterm-256color": true, "screen.xterm": true, "a": true, "vt100+fnkeys": true, "9term": true,
		"": false, "-x": false, ".x": false, "x y": false, "x/y": false, "x\x1b": false, "é": false,
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false,
	} {
		if termName(s) != want {
			t.Errorf("termName(%q) = %v, want %v", s, !want, want)
		}
	}
	if _, err := ParseTTY("../x:24x80"); err == nil {
		t.Error("ParseTTY took ../x")
	}
}

// Output passed on by tee(2) while the client keeps up arrives whole and
// in order, through a ring smaller than it (the client's acks make room),
// across a cut in the middle (the second attachment resumes from the
// offset it names, from the ring) and to the exit.
func TestTeeOutput(t *testing.T) {
	dir := holderIn(t)
	var want bytes.Buffer
	for i := 1; i <= 300000; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	teed0 := teed.Load()
	c := openFiles(t, dir, "open", "t1", "seq 1 300000")
	var got bytes.Buffer
	read := func(c *fileClient, until int) *sessionwire.Frame {
		for got.Len() < until {
			f, err := sessionwire.Read(c.out)
			if err != nil {
				t.Fatal(err)
			}
			switch f.Type {
			case sessionwire.Data:
				if f.Stream != sessionwire.Stdout || f.Off != uint64(got.Len()) {
					t.Fatalf("stream %d at %d, want stdout at %d", f.Stream, f.Off, got.Len())
				}
				got.Write(f.Data)
				// 16 KiB behind: what a resume may ask for again.
				if got.Len() > 16<<10 {
					c.send(sessionwire.Frame{Type: sessionwire.Ack, Stream: sessionwire.Stdout, Off: uint64(got.Len() - 16<<10)})
				}
			case sessionwire.Exit:
				return &f
			}
		}
		return nil
	}
	read(c, 700<<10)
	c.cut()
	<-c.res
	// Back having kept 1000 bytes less than it was sent.
	got.Truncate(got.Len() - 1000)
	c = openFiles(t, dir, "attach", "t1", "")
	c.send(sessionwire.Frame{Type: sessionwire.Resume, Off: uint64(got.Len())})
	x := read(c, want.Len()+1)
	if x == nil || x.Code != 0 {
		t.Fatalf("exit %+v", x)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("got %d bytes, want %d; they differ", got.Len(), want.Len())
	}
	c.send(sessionwire.Frame{Type: sessionwire.Bye})
	<-c.res
	if teed.Load() == teed0 {
		t.Error("no byte went by tee")
	}
}

// Stdin goes to the command whole and in order when most of it is
// written from its frames (the ring empty) and the rest through the ring
// (a command that reads slowly), and the holder acknowledges it in steps
// of inAckEvery, not once a write.
func TestStdinDirect(t *testing.T) {
	dir := holderIn(t)
	in := make([]byte, 4<<20)
	for i := range in {
		in[i] = byte(i * 7 >> 3)
	}
	sum := sha256.Sum256(in)
	direct0 := directIn.Load()
	c := openFiles(t, dir, "open", "i1", "sleep 0.2; sha256sum")
	go func() {
		for off := 0; off < len(in); off += 100 << 10 {
			end := min(off+100<<10, len(in))
			c.send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Off: uint64(off), Data: in[off:end]})
		}
		c.send(sessionwire.Frame{Type: sessionwire.EOF, Stream: sessionwire.Stdin, Off: uint64(len(in))})
	}()
	out, acks, acked, _ := c.toExit(t)
	if want := hex.EncodeToString(sum[:]) + "  -\n"; string(out) != want {
		t.Errorf("sha256sum says %q, want %q", out, want)
	}
	if acked != uint64(len(in)) || acks > len(in)/inAckEvery+1 {
		t.Errorf("%d acks, the last at %d; want at most %d, the last at %d", acks, acked, len(in)/inAckEvery+1, len(in))
	}
	if directIn.Load() == direct0 {
		t.Error("no stdin was written from its frame")
	}
}

// Stdin frames with large payloads go from the Exec's pipe to the
// command's by splice(2) while nothing waits in the ring, whole and in
// order: a frame that overlaps what the command has (sent twice, as a
// client does after a resume) reaches it once, and a command that reads
// slowly at first takes the first frames through the ring.
func TestStdinSpliced(t *testing.T) {
	dir := holderIn(t)
	in := make([]byte, 8<<20)
	for i := range in {
		in[i] = byte(i*13>>5 + i>>17)
	}
	sum := sha256.Sum256(in)
	spliced0 := splicedIn.Load()
	c := openFiles(t, dir, "open", "s1", "sleep 0.2; sha256sum")
	go func() {
		const chunk = 128 << 10
		for off := 0; off < len(in); off += chunk {
			end := min(off+chunk, len(in))
			c.send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Off: uint64(off), Data: in[off:end]})
			if off == 4<<20 {
				// Half of it again, and half new.
				c.send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Off: uint64(end - chunk/2), Data: in[end-chunk/2 : end+chunk/2]})
				c.send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Off: uint64(end), Data: in[end : end+chunk]})
			}
		}
		c.send(sessionwire.Frame{Type: sessionwire.EOF, Stream: sessionwire.Stdin, Off: uint64(len(in))})
	}()
	out, _, acked, _ := c.toExit(t)
	if want := hex.EncodeToString(sum[:]) + "  -\n"; string(out) != want {
		t.Errorf("sha256sum says %q, want %q", out, want)
	}
	if acked != uint64(len(in)) {
		t.Errorf("stdin acknowledged to %d, want %d", acked, len(in))
	}
	if splicedIn.Load() == spliced0 {
		t.Error("no stdin went by splice")
	}
}

// A kill behind stdin that a command does not read reaches it: the
// holder takes what the command's pipe does not into the ring, as before
// stdin went by splice, and reads the frames after it.
func TestKillBehindStdin(t *testing.T) {
	dir := holderBound(t, 4<<20)
	c := openFiles(t, dir, "open", "k1", "sleep 60")
	go func() {
		chunk := make([]byte, 128<<10)
		for off := 0; off < 3<<20; off += len(chunk) {
			c.send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Off: uint64(off), Data: chunk})
		}
		c.send(sessionwire.Frame{Type: sessionwire.Kill})
	}()
	if _, _, _, exit := c.toExit(t); exit.Text == "" {
		t.Errorf("exit %+v, want a signal's", exit)
	}
}
