package box

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// cutListener is a gRPC server's listener whose link can be cut: cut
// closes the connections it gave and, until heal, closes each new one as
// it comes (a refused dial), sending on refused for each.
type cutListener struct {
	net.Listener
	refused chan struct{}

	mu       sync.Mutex
	conns    []net.Conn
	refusing bool
}

func (l *cutListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if !l.refusing {
			l.conns = append(l.conns, c)
			l.mu.Unlock()
			return c, nil
		}
		l.mu.Unlock()
		c.Close()
		select {
		case l.refused <- struct{}{}:
		default:
		}
	}
}

func (l *cutListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refusing = true
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func (l *cutListener) heal() {
	l.mu.Lock()
	l.refusing = false
	l.mu.Unlock()
}

// linkServer plays the box half of one session: the open takes stdin to
// its EOF and signals opened, then holds the stream; an attach sends its
// first message after the start (sent before the box answers) on first,
// then says hello and the exit.
type linkServer struct {
	controlv1.UnimplementedSessionServer
	opened chan struct{}
	first  chan []byte
}

func (s *linkServer) Exec(st grpc.BidiStreamingServer[controlv1.ExecRequest, controlv1.ExecResponse]) error {
	r, err := st.Recv()
	if err != nil {
		return err
	}
	open := strings.HasPrefix(r.GetStart().GetCommand(), "set -- open ")
	send := func(f sessionwire.Frame) error {
		return st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stdout{Stdout: sessionwire.Append(nil, f)}})
	}
	started := func() error {
		return st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Started{Started: &controlv1.Started{}}})
	}
	if !open {
		r, err := st.Recv()
		if err != nil {
			return err
		}
		s.first <- r.GetStdin()
		if err := started(); err != nil {
			return err
		}
		if err := send(sessionwire.Frame{Type: sessionwire.Hello, Text: "id"}); err != nil {
			return err
		}
		if err := send(sessionwire.Frame{Type: sessionwire.Exit}); err != nil {
			return err
		}
		for {
			if _, err := st.Recv(); err != nil {
				return nil
			}
		}
	}
	if err := started(); err != nil {
		return err
	}
	if err := send(sessionwire.Frame{Type: sessionwire.Hello, Text: "id"}); err != nil {
		return err
	}
	var ps sessionwire.Parser
	for eof := false; !eof; {
		r, err := st.Recv()
		if err != nil {
			return err
		}
		if err := ps.Feed(r.GetStdin(), func(f sessionwire.Frame) error {
			eof = eof || f.Type == sessionwire.EOF
			return nil
		}); err != nil {
			return err
		}
	}
	// Output after the hello: once the client has shown it, it has the
	// hello too.
	if err := send(sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdout, Data: []byte("x")}); err != nil {
		return err
	}
	close(s.opened)
	<-st.Context().Done()
	return nil
}

// TestResumeAttachWaitsForLink: after a loss, while every dial is
// refused, a resumable session makes one attach that waits for the link
// (gRPC's WaitForReady, the dials paced by the connection's backoff)
// rather than failing at once and trying again after a pause; its first
// message, sent with the start before the box answers, carries the
// resume and the stdin the box has not acknowledged (no round trip
// between them); the lines say the loss and the resume. Not timed: the
// link comes back after five refused dials, and the Exec calls are
// counted.
func TestResumeAttachWaitsForLink(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	lis := &cutListener{Listener: inner, refused: make(chan struct{}, 1024)}
	srv := &linkServer{opened: make(chan struct{}), first: make(chan []byte, 1)}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(bufpool.Codec{}))
	controlv1.RegisterSessionServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	ep, err := ParseEndpoint("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	var execs atomic.Int32
	count := func(o *dialOptions) {
		o.extra = append(o.extra, grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if strings.HasSuffix(method, "/Exec") {
				execs.Add(1)
			}
			return streamer(ctx, desc, cc, method, opts...)
		}))
	}
	var notes syncBuffer
	c, err := Dial(ep, "", WithResume(Resume{Notify: &notes, Window: time.Minute}), count)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	shown := make(signalWriter)
	type result struct {
		st  ExitStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := c.Exec(context.Background(), &Command{Box: "main", Line: "cat", Stdin: strings.NewReader("onetwo"), Stdout: shown})
		done <- result{st, err}
	}()
	<-srv.opened
	<-shown
	lis.cut()
	for range 5 {
		<-lis.refused
	}
	lis.heal()
	first := <-srv.first
	r := <-done
	if r.err != nil || r.st.Code != 0 {
		t.Fatalf("Exec: %+v, %v", r.st, r.err)
	}
	if n := execs.Load(); n != 2 {
		t.Errorf("%d Exec calls, want 2: the open, and one attach that waited for the link", n)
	}
	var types []byte
	var data []byte
	var ps sessionwire.Parser
	if err := ps.Feed(first, func(f sessionwire.Frame) error {
		if len(types) == 0 || types[len(types)-1] != f.Type {
			types = append(types, f.Type)
		}
		if f.Type == sessionwire.Data {
			data = append(data, f.Data...)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if string(types) != string([]byte{sessionwire.Resume, sessionwire.Data, sessionwire.EOF}) || string(data) != "onetwo" {
		t.Errorf("the attach's first message has frames %q with stdin %q, want the resume, the stdin \"onetwo\" and its EOF", types, data)
	}
	if !regexp.MustCompile(`^cocoonbox: connection to main lost; reconnecting\n(.*\n)*cocoonbox: resumed after \d+ s\n$`).MatchString(notes.String()) {
		t.Errorf("the lines do not say the loss, then the resume:\n%s", notes.String())
	}
}

// signalWriter is closed at its first write.
type signalWriter chan struct{}

func (w signalWriter) Write(p []byte) (int, error) {
	select {
	case <-w:
	default:
		close(w)
	}
	return len(p), nil
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
