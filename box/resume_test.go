package box_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// resumableClient is sessionClient with resumable Execs, their lines to
// notify.
func resumableClient(t *testing.T, srv controlv1.SessionServer, notify io.Writer) *box.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(bufpool.Codec{}))
	controlv1.RegisterSessionServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	ep, err := box.ParseEndpoint("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	c, err := box.Dial(ep, "", box.WithResume(box.Resume{Notify: notify, Window: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type execStream = grpc.BidiStreamingServer[controlv1.ExecRequest, controlv1.ExecResponse]

func sendStdout(st execStream, b []byte) error {
	return st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stdout{Stdout: b}})
}

// playSession answers a session's open or attach as the box half does
// for a command that echoes its stdin and exits 0: hello, the stdin's
// bytes back as stdout once its EOF came, the exit, then it waits for
// the bye.
func playSession(st execStream) error {
	if err := st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Started{Started: &controlv1.Started{}}}); err != nil {
		return err
	}
	if err := sendStdout(st, sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Hello, Text: "id"})); err != nil {
		return err
	}
	var in []byte
	var ps sessionwire.Parser
	for {
		r, err := st.Recv()
		if err != nil {
			return err
		}
		bye, eof := false, false
		if err := ps.Feed(r.GetStdin(), func(f sessionwire.Frame) error {
			switch f.Type {
			case sessionwire.Data:
				if f.Off == uint64(len(in)) {
					in = append(in, f.Data...)
				}
			case sessionwire.EOF:
				eof = true
			case sessionwire.Bye:
				bye = true
			}
			return nil
		}); err != nil {
			return err
		}
		if bye {
			return st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Exit{Exit: &controlv1.Exit{}}})
		}
		if eof {
			var out []byte
			for off := 0; off < len(in); off += 256 << 10 {
				out = sessionwire.AppendData(out, sessionwire.Stdout, uint64(off), in[off:min(off+256<<10, len(in))])
			}
			out = sessionwire.Append(out, sessionwire.Frame{Type: sessionwire.Exit})
			if err := sendStdout(st, out); err != nil {
				return err
			}
		}
	}
}

// lostStartServer loses its first Exec before it answers the start (a
// stream cut as the open went), and plays the session on the next.
type lostStartServer struct {
	controlv1.UnimplementedSessionServer
	calls atomic.Int32
}

func (s *lostStartServer) Exec(st execStream) error {
	if r, err := st.Recv(); err != nil || r.GetStart() == nil {
		return err
	}
	if s.calls.Add(1) == 1 {
		return status.Error(codes.Unavailable, "connection reset")
	}
	return playSession(st)
}

// startedReader is the git helper's stdin: nothing is read before the
// command has started (box.Command.Started).
type startedReader struct {
	started chan struct{}
	r       io.Reader
}

func (r *startedReader) Read(p []byte) (int, error) {
	<-r.started
	return r.r.Read(p)
}

// TestResumeStartedAfterLostStart: a first stream lost before the box
// answered its start does not lose Command.Started: it comes once, with
// the attempt that started, and a caller whose stdin waits for it (git's
// remote helper) goes on (it waited for ever).
func TestResumeStartedAfterLostStart(t *testing.T) {
	srv := &lostStartServer{}
	c := resumableClient(t, srv, io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var n atomic.Int32
	in := &startedReader{started: make(chan struct{}), r: strings.NewReader("want ref\n")}
	var out strings.Builder
	st, err := c.Exec(ctx, &box.Command{Box: "main", Line: "git-upload-pack x", Stdin: in, Stdout: &out,
		Started: func() {
			if n.Add(1) == 1 {
				close(in.started)
			}
		}})
	if err != nil || st.Code != 0 || out.String() != "want ref\n" {
		t.Fatalf("Exec = %+v, %v, stdout %q; want exit 0 and stdin echoed", st, err, out.String())
	}
	if got := n.Load(); got != 1 {
		t.Errorf("Started called %d times, want 1", got)
	}
	if got := srv.calls.Load(); got != 2 {
		t.Errorf("%d Execs, want 2 (the lost one and the one that ran)", got)
	}
}

// noSessionServer is a box whose agent has no session verbs: the box's
// shell says so on stderr and exits 127; the plain Exec that follows
// echoes its stdin.
type noSessionServer struct {
	controlv1.UnimplementedSessionServer
	mu    sync.Mutex
	lines []string
}

func (s *noSessionServer) Exec(st execStream) error {
	r, err := st.Recv()
	if err != nil || r.GetStart() == nil {
		return err
	}
	line := r.GetStart().GetCommand()
	s.mu.Lock()
	s.lines = append(s.lines, line)
	s.mu.Unlock()
	if err := st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Started{Started: &controlv1.Started{}}}); err != nil {
		return err
	}
	if strings.Contains(line, "cocoonbox-agent session") {
		st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stderr{Stderr: []byte("sh: 1: exec: cocoonbox-agent: not found\n")}})
		return st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Exit{Exit: &controlv1.Exit{Code: 127}}})
	}
	var in []byte
	for {
		r, err := st.Recv()
		if err != nil {
			return err
		}
		in = append(in, r.GetStdin()...)
		if r.GetCloseStdin() != nil {
			break
		}
	}
	sendStdout(st, in)
	return st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Exit{Exit: &controlv1.Exit{Code: 3}}})
}

// TestResumeNoSessionsOneLine: a box that cannot hold sessions runs the
// command as a plain Exec, its stdin whole, and the client says so in one
// line that names what the box said; the box's shell's own complaint is
// not the command's stderr.
func TestResumeNoSessionsOneLine(t *testing.T) {
	srv := &noSessionServer{}
	var notify bytes.Buffer
	c := resumableClient(t, srv, &notify)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb strings.Builder
	st, err := c.Exec(ctx, &box.Command{Box: "main", Line: "cat; exit 3", Stdin: strings.NewReader("all of it\n"), Stdout: &out, Stderr: &errb})
	if err != nil || st.Code != 3 || out.String() != "all of it\n" {
		t.Fatalf("Exec = %+v, %v, stdout %q; want exit 3 and stdin echoed", st, err, out.String())
	}
	if errb.Len() != 0 {
		t.Errorf("the command's stderr has %q; want nothing (the box's shell spoke to us)", errb.String())
	}
	want := "cocoonbox: the box main cannot keep a command across a lost connection (its cocoonbox-agent has no sessions: sh: 1: exec: cocoonbox-agent: not found); running it without\n"
	if notify.String() != want {
		t.Errorf("notify = %q\nwant %q", notify.String(), want)
	}
	if l := strings.TrimSuffix(strings.TrimPrefix(notify.String(), "cocoonbox: "), "\n"); !box.IsNotice(l) {
		t.Errorf("IsNotice(%q) = false; want true", l)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.lines) != 2 || srv.lines[1] != "cat; exit 3" {
		t.Errorf("lines run = %q; want the session's, then the command's", srv.lines)
	}
}

func TestIsNotice(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"connection to main lost; reconnecting", true},
		{"connection to my-box lost; reconnecting (12 s)", true},
		{"connection to main lost; reconnecting (2 min)", true},
		{"resumed after 0 s", true},
		{"resumed after 3 min", true},
		{"gave up after 5 min: the command in main was ended", false},
		{"exec in main: the connection to https://127.0.0.1:1 was lost while the command ran (x); the command in the box ended with it (COCOONBOX_RESUME=on makes commands outlive a lost connection)", false},
		{"no box named main", false},
		{"resumed after 3 s; and then", false},
	} {
		if got := box.IsNotice(tc.line); got != tc.want {
			t.Errorf("IsNotice(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

// echoServer plays every Exec as a session that echoes its stdin.
type echoServer struct {
	controlv1.UnimplementedSessionServer
}

func (echoServer) Exec(st execStream) error { return playSession(st) }

// Stdin of a resumable command reaches the box whole and in order when
// its frames are sent from the ring in place (pieces of the ring the
// message refers to), across the ring's wrap and growth.
func TestResumeStdinFromRing(t *testing.T) {
	c := resumableClient(t, echoServer{}, io.Discard)
	in := make([]byte, 3<<20+12345)
	for i := range in {
		in[i] = byte(i*31>>7 + i)
	}
	var out bytes.Buffer
	// Read in odd pieces, so that frames and the ring's ends fall anywhere.
	r := io.MultiReader(bytes.NewReader(in[:777]), io.LimitReader(bytes.NewReader(in[777:]), 1<<20), bytes.NewReader(in[777+1<<20:]))
	st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: "cat", Stdin: r, Stdout: &out})
	if err != nil || st.Code != 0 {
		t.Fatal(st, err)
	}
	if !bytes.Equal(out.Bytes(), in) {
		t.Fatalf("the box got %d bytes, want %d; they differ", out.Len(), len(in))
	}
}

// doubleExitServer is a hostile box half: after its hello it sends the
// Exit frame twice in one message, then waits for the client to go.
type doubleExitServer struct {
	controlv1.UnimplementedSessionServer
}

func (doubleExitServer) Exec(st execStream) error {
	if r, err := st.Recv(); err != nil || r.GetStart() == nil {
		return err
	}
	if err := st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Started{Started: &controlv1.Started{}}}); err != nil {
		return err
	}
	out := sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Hello, Text: "id"})
	out = sessionwire.Append(out, sessionwire.Frame{Type: sessionwire.Exit, Code: 3})
	out = sessionwire.Append(out, sessionwire.Frame{Type: sessionwire.Exit, Code: 4})
	if err := sendStdout(st, out); err != nil {
		return err
	}
	for {
		if _, err := st.Recv(); err != nil {
			return nil
		}
	}
}

// TestResumeDoubleExit: a box that sends its exit twice does not make
// the client panic (close of a closed channel); the first exit counts.
func TestResumeDoubleExit(t *testing.T) {
	c := resumableClient(t, doubleExitServer{}, io.Discard)
	st, err := c.Exec(context.Background(), &box.Command{Box: "main", Line: "true", Stdout: io.Discard})
	if err != nil || st.Code != 3 {
		t.Fatalf("got %+v, %v; want exit 3", st, err)
	}
}

// killWatchServer plays a terminal session that prints a line and then
// waits: it tells killed whether the client sent a kill before its
// stream ended.
type killWatchServer struct {
	controlv1.UnimplementedSessionServer
	killed chan bool
}

func (s killWatchServer) Exec(st execStream) error {
	if r, err := st.Recv(); err != nil || r.GetStart() == nil {
		return err
	}
	if err := st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Started{Started: &controlv1.Started{}}}); err != nil {
		return err
	}
	out := sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Hello, Text: "id"})
	out = sessionwire.AppendData(out, sessionwire.Stdout, 0, []byte("y\r\n"))
	if err := sendStdout(st, out); err != nil {
		return err
	}
	var ps sessionwire.Parser
	for {
		r, err := st.Recv()
		if err != nil {
			s.killed <- false
			return nil
		}
		kill := false
		ps.Feed(r.GetStdin(), func(f sessionwire.Frame) error {
			kill = kill || f.Type == sessionwire.Kill
			return nil
		})
		if kill {
			s.killed <- true
			return st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stdout{Stdout: sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Exit, Text: "KILL"})}})
		}
	}
}

// TestResumeTerminalBrokenPipe: a terminal command whose output goes to
// a pipe the reader closed (rsh -t main yes | head -1) is ended in the
// box, as ssh's is; it was kept there for the terminal window, as after
// a hangup.
func TestResumeTerminalBrokenPipe(t *testing.T) {
	srv := killWatchServer{killed: make(chan bool, 1)}
	c := resumableClient(t, srv, io.Discard)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	defer pw.Close()
	_, err = c.Exec(context.Background(), &box.Command{Box: "main", Line: "yes", TTY: &box.TTY{Term: "xterm", Rows: 24, Cols: 80}, Stdout: pw, Stderr: io.Discard})
	if !errors.Is(err, syscall.EPIPE) {
		t.Errorf("Exec: %v, want a broken pipe", err)
	}
	if !<-srv.killed {
		t.Fatal("the command was left running in the box after its output's reader went")
	}
}
