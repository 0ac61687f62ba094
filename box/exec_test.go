package box_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// sessionClient is a client of a server of srv's Session on a unix
// socket, both stopped when t ends.
func sessionClient(t *testing.T, srv controlv1.SessionServer) *box.Client {
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
	c, err := box.Dial(ep, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// firstStdinServer answers an Exec's start with started only once the
// first stdin has come, then echoes it and exits 0: a client that waited
// for started before sending stdin would hang.
type firstStdinServer struct {
	controlv1.UnimplementedSessionServer
}

func (firstStdinServer) Exec(st grpc.BidiStreamingServer[controlv1.ExecRequest, controlv1.ExecResponse]) error {
	if r, err := st.Recv(); err != nil || r.GetStart() == nil {
		return err
	}
	r, err := st.Recv()
	if err != nil {
		return err
	}
	if err := st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Started{Started: &controlv1.Started{}}}); err != nil {
		return err
	}
	st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stdout{Stdout: r.GetStdin()}})
	return st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Exit{Exit: &controlv1.Exit{}}})
}

// TestExecSendsFirstStdinWithStart: without a terminal the first chunk of
// stdin follows the start at once, not after started, saving a client
// that speaks first (rsync) a round trip (docs/protocol.md).
func TestExecSendsFirstStdinWithStart(t *testing.T) {
	c := sessionClient(t, firstStdinServer{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// stdin stays open: only its first chunk can have been read.
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("version 32\n"))
	var out strings.Builder
	st, err := c.Exec(ctx, &box.Command{Box: "main", Stdin: pr, Stdout: &out})
	if err != nil || st.Code != 0 || out.String() != "version 32\n" {
		t.Fatalf("Exec = %+v, %v, stdout %q; want exit 0 and the first stdin echoed", st, err, out.String())
	}
}

// closeStdinServer answers an Exec's start with started only once stdin
// has been closed, then echoes it and exits 0: a client that closed stdin
// only after started would hang.
type closeStdinServer struct {
	controlv1.UnimplementedSessionServer
}

func (closeStdinServer) Exec(st grpc.BidiStreamingServer[controlv1.ExecRequest, controlv1.ExecResponse]) error {
	if r, err := st.Recv(); err != nil || r.GetStart() == nil {
		return err
	}
	var in []byte
	for {
		r, err := st.Recv()
		if err != nil {
			return err
		}
		if r.GetCloseStdin() != nil {
			break
		}
		in = append(in, r.GetStdin()...)
	}
	if err := st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Started{Started: &controlv1.Started{}}}); err != nil {
		return err
	}
	st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Stdout{Stdout: in}})
	return st.Send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Exit{Exit: &controlv1.Exit{}}})
}

// TestExecClosesShortStdinWithStart: stdin that its first read ends (an
// in-memory reader, empty or not, a short file) is closed right behind
// the start, so a command that reads its input to the end before it
// answers costs one round trip, not two (docs/protocol.md).
func TestExecClosesShortStdinWithStart(t *testing.T) {
	c := sessionClient(t, closeStdinServer{})
	file := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(file, []byte("from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tt := range []struct {
		name string
		in   io.Reader
		want string
	}{
		{"strings.Reader", strings.NewReader("BACK\n"), "BACK\n"},
		{"empty", strings.NewReader(""), ""},
		{"bytes.Buffer", bytes.NewBufferString("a message"), "a message"},
		{"file", f, "from a file\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out strings.Builder
			st, err := c.Exec(ctx, &box.Command{Box: "main", Stdin: tt.in, Stdout: &out})
			if err != nil || st.Code != 0 || out.String() != tt.want {
				t.Fatalf("Exec = %+v, %v, stdout %q; want exit 0 and %q echoed", st, err, out.String(), tt.want)
			}
		})
	}
}
