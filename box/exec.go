package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

const (
	// chunkSize is the largest stdin message the client sends, in bytes.
	chunkSize = 128 << 10
	// maxMessage bounds one received message, in bytes.
	maxMessage = 4 << 20
	// ioBuffer is the size of gRPC's socket read and write buffers: HTTP/2
	// frames are at most 16 KiB, and a bigger buffer writes many per syscall.
	ioBuffer = 256 << 10
)

// TTY asks for a terminal (session.proto Tty).
type TTY struct {
	Term       string
	Rows, Cols uint32
	// Terminfo is the compiled terminfo entry for Term; nil if none.
	Terminfo []byte
	// Modes are terminal modes for the box's terminal in RFC 4254
	// section 8's encoding, as an SSH pty-req carries them; nil leaves the
	// box's defaults.
	Modes []byte
}

// Size is a terminal size in character cells.
type Size struct{ Rows, Cols uint32 }

// Command is one remote command to run with Client.Exec.
type Command struct {
	// Box is a box name or id.
	Box string
	// Line is run by the box user's shell with -c; empty starts a login shell.
	Line string
	// Env adds variables to the remote environment; nothing else of the
	// local environment is sent.
	Env map[string]string
	// Dir is the remote working directory; empty means the workspace.
	Dir string
	// TTY, if not nil, runs the command on a terminal.
	TTY *TTY

	// Stdin is copied to the command one chunk at a time, only as fast as
	// the stream accepts it; its EOF closes the remote stdin. Nil closes it
	// at once.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output byte for byte; nil
	// discards it. With a TTY the remote's output all arrives on Stdout.
	Stdout, Stderr io.Writer
	// Signals delivers signal names ("INT", "TERM", "HUP", ...) to the
	// remote process group while the command runs; may be nil.
	Signals <-chan string
	// Resizes delivers new terminal sizes; may be nil.
	Resizes <-chan Size
	// StdoutClosed, if not nil, is closed when the caller reads no more
	// stdout (OpenSSH's eow@openssh.com): from then on stdout is dropped,
	// and the box closes its end of the command's stdout pipe
	// (close_stdout), so the command's next write to it fails with EPIPE.
	StdoutClosed <-chan struct{}
	// Progress, if not nil, receives one line per phase when the box has to
	// be woken first.
	Progress io.Writer
	// Started, if not nil, is called once the command runs, before any
	// stdin is read: a terminal goes raw only then. A resumable Exec calls
	// it once, when the first of its streams starts, also when an earlier
	// one was lost before.
	Started func()

	// Attach, with a TTY, takes back the detached terminal session of
	// that id (Sessions) instead of running Line: its output since the
	// box's acknowledged offset comes first. Env and Dir are not used.
	Attach string
	// StatusLine, if not nil, is the local terminal (raw) on which a
	// resumable terminal session shows its one reconnecting line in place
	// and restores the cursor after; else the lines go to Resume.Notify.
	StatusLine io.Writer
	// GiveUp, if not empty, ends that reconnecting line with how to give
	// up waiting ("~. gives up"): a Ctrl-C typed on a raw terminal is a
	// byte for the box, not a way out.
	GiveUp string

	// waitLink makes the call wait for the connection while it is being
	// made again (gRPC's WaitForReady) rather than fail at once: a
	// resumable session's attach after a loss goes the moment the link is
	// back, the dials paced by the connection's backoff (reconnectBackoff).
	waitLink bool
}

// ExitStatus is how a remote command ended (session.proto Exit).
type ExitStatus struct {
	// Code is the exit code, 0 to 255, when Signal is empty.
	Code int
	// Signal is the name of the signal that killed the command, without SIG.
	Signal string
	// Error is the server's reason when the command could not run or was cut
	// short.
	Error string
}

// Text describes how the command ended, for an error message: the
// server's Error when there is one, else "killed by SIG" and the signal's
// name, else "exit status " and the code (also for 0).
func (s ExitStatus) Text() string {
	switch {
	case s.Error != "":
		return s.Error
	case s.Signal != "":
		return "killed by SIG" + s.Signal
	}
	return "exit status " + strconv.Itoa(s.Code)
}

// WriteError is a failure to write the command's output locally, such as
// EPIPE when the reader of our stdout has gone. Exec cancels the call.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "write output: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// Exec runs cmd in its box and returns how it ended. A box that is not
// running is woken with Ensure and the call retried once. The error is
// non-nil only for failures of the client or the transport: then the
// command's status is unknown.
//
// Without a terminal, the first chunk of stdin goes right behind the
// start, not a round trip later after started: a command whose client
// speaks first (rsync) saves that round trip. When that read ends the
// input (EOF, or an in-memory reader such as a *strings.Reader with
// nothing left), close_stdin goes with it too, so a command that reads
// its input to the end before it answers costs one round trip, not two.
// Both are kept until started, and sent again on the retry after a
// wake. With a terminal no stdin is read before started (the terminal
// goes raw only then).
//
// With WithResume, a command runs as a resumable session (Resume): Exec
// then outlives the stream it started on (with Resume.Terminals, a
// command on a terminal only). A cancel of ctx with cause
// ErrDetached leaves such a command running in the box for its window.
func (c *Client) Exec(ctx context.Context, cmd *Command) (ExitStatus, error) {
	if c.resume != nil && (!c.resume.Terminals || cmd.TTY != nil) || cmd.Attach != "" && cmd.TTY != nil {
		return c.execResumable(ctx, cmd)
	}
	return c.exec(ctx, cmd)
}

// exec is Exec on one stream; an error of the transport is a lostError.
func (c *Client) exec(ctx context.Context, cmd *Command) (ExitStatus, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var first *firstChunk
	if cmd.TTY == nil && cmd.Stdin != nil {
		first = readFirst(cmd.Stdin)
	}
	st, execID, err := c.start(ctx, cmd, first)
	if notRunning(err) {
		if _, err := c.Ensure(ctx, cmd.Box, cmd.Progress); err != nil {
			return ExitStatus{}, err
		}
		st, execID, err = c.start(ctx, cmd, first)
	}
	if err != nil {
		return ExitStatus{}, c.lost("exec in "+cmd.Box, err, false)
	}
	if first != nil && first.peek {
		// Before Exec can return, so that what follows on the file starts
		// past what was sent, whenever the command ends.
		first.wait()
		if first.got.commit(cmd.Stdin) != nil {
			first.got.err = io.ErrUnexpectedEOF
		}
	}
	if cmd.Started != nil {
		cmd.Started()
	}
	s := &stream{st: st, c: c, execID: execID}
	go s.pumpStdin(cmd.Stdin, first)
	go s.pumpControl(ctx, cmd.Signals, cmd.Resizes)
	var dropStdout atomic.Bool
	if cmd.StdoutClosed != nil {
		go func() {
			select {
			case <-ctx.Done():
			case <-cmd.StdoutClosed:
				dropStdout.Store(true)
				s.send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_CloseStdout{CloseStdout: &controlv1.CloseStdout{}}})
			}
		}()
	}
	return c.receive(st, cmd, &dropStdout)
}

// firstChunk is the first read of a command's stdin, made while the start
// is on its way.
type firstChunk struct {
	// read delivers the read's result once; nil after it has.
	read chan firstRead
	got  *firstRead
	// sent is whether got's bytes went on the current stream; closed
	// whether close_stdin went after them, as the read ended the input.
	sent, closed bool
	// peek is whether the read is from a regular file at its offset,
	// which Exec moves past the chunk once started (commit).
	peek bool
}

type firstRead struct {
	b   []byte
	err error
}

// readFirst reads the first chunk of in. From a regular file it reads at
// the file's offset without moving it, so that a start the box refuses
// takes none of the file, as ssh to a host that refuses reads none
// (`(cocoonbox-ssh nobox cmd; cat) < file`); from a pipe what was read is
// gone.
func readFirst(in io.Reader) *firstChunk {
	f := &firstChunk{read: make(chan firstRead, 1)}
	file, off, ok := regularFile(in)
	f.peek = ok
	go func() {
		b := make([]byte, chunkSize)
		var n int
		var err error
		if f.peek {
			n, err = file.ReadAt(b, off)
		} else {
			n, err = in.Read(b)
			if l, ok := in.(interface{ Len() int }); ok && err == nil && l.Len() == 0 {
				// An in-memory reader read whole: its next Read is EOF.
				err = io.EOF
			}
		}
		f.read <- firstRead{b[:n], err}
	}()
	return f
}

// regularFile returns in as a regular file and its offset.
func regularFile(in io.Reader) (*os.File, int64, bool) {
	file, ok := in.(*os.File)
	if !ok {
		return nil, 0, false
	}
	if fi, err := file.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, 0, false
	}
	off, err := file.Seek(0, io.SeekCurrent)
	return file, off, err == nil
}

// commit moves a regular file's offset past a chunk read at it, as if
// it had been read.
func (r *firstRead) commit(in io.Reader) error {
	if len(r.b) == 0 {
		return nil
	}
	_, err := in.(*os.File).Seek(int64(len(r.b)), io.SeekCurrent)
	return err
}

// take records the read's result once it has come.
func (f *firstChunk) take(r firstRead) {
	f.got, f.read = &r, nil
}

// wait waits for the read's result, if it has not come yet.
func (f *firstChunk) wait() {
	if f.read != nil {
		f.take(<-f.read)
	}
}

// send sends what was read with send, if anything and not yet on the
// current stream, and close_stdin after it when the read ended the input.
func (f *firstChunk) send(send func(*controlv1.ExecRequest) error) error {
	if f.got == nil || f.sent {
		return nil
	}
	f.sent, f.closed = true, false
	if len(f.got.b) > 0 {
		if err := send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_Stdin{Stdin: f.got.b}}); err != nil {
			return err
		}
	}
	if f.got.err == nil {
		return nil
	}
	f.closed = true
	return send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_CloseStdin{CloseStdin: &controlv1.CloseStdin{}}})
}

// start opens the stream, sends start (and the first chunk of stdin, as
// soon as it is read) and waits for started.
func (c *Client) start(ctx context.Context, cmd *Command, first *firstChunk) (controlv1.Session_ExecClient, string, error) {
	opts := []grpc.CallOption{grpc.ForceCodecV2(bufpool.Codec{})}
	if cmd.waitLink {
		opts = append(opts, grpc.WaitForReady(true))
	}
	st, err := c.session.Exec(ctx, opts...)
	if err != nil {
		return nil, "", err
	}
	start := &controlv1.Start{Box: cmd.Box, Command: cmd.Line, Env: cmd.Env, Dir: cmd.Dir}
	if t := cmd.TTY; t != nil {
		start.Tty = &controlv1.Tty{Term: t.Term, Rows: t.Rows, Cols: t.Cols, Terminfo: t.Terminfo, Modes: t.Modes}
	}
	if err := st.Send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_Start{Start: start}}); err != nil {
		if err == io.EOF {
			_, err = st.Recv()
		}
		return nil, "", err
	}
	type answer struct {
		r   *controlv1.ExecResponse
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		r, err := st.Recv()
		answered <- answer{r, err}
	}()
	// A failed send shows in the answer to the start.
	var read chan firstRead
	if first != nil {
		first.sent = false
		first.send(st.Send)
		read = first.read
	}
	for {
		select {
		case r := <-read:
			first.take(r)
			first.send(st.Send)
			read = nil
			continue
		case a := <-answered:
			if a.err != nil {
				return nil, "", a.err
			}
			if a.r.GetStarted() == nil {
				return nil, "", fmt.Errorf("protocol error: the server answered start with %T, not started", a.r.GetMsg())
			}
			return st, a.r.GetStarted().GetExecId(), nil
		}
	}
}

// The numbers of ExecResponse's stdout and stderr, received as a
// bufpool.Chunk.
var (
	stdoutField = bufpool.FieldNumber(&controlv1.ExecResponse{}, "stdout")
	stderrField = bufpool.FieldNumber(&controlv1.ExecResponse{}, "stderr")
)

// receive writes the command's output until its exit; stdout is dropped
// once dropStdout is set.
func (c *Client) receive(st controlv1.Session_ExecClient, cmd *Command, dropStdout *atomic.Bool) (ExitStatus, error) {
	var exit *controlv1.Exit
	r := &controlv1.ExecResponse{}
	chunk := &bufpool.Chunk{Fields: []protowire.Number{stdoutField, stderrField}, Msg: r}
	defer chunk.Free()
	for {
		err := st.RecvMsg(chunk)
		if err == io.EOF {
			if exit == nil {
				return ExitStatus{}, fmt.Errorf("exec in %s: the server closed the stream without an exit status", cmd.Box)
			}
			return ExitStatus{Code: int(exit.GetCode()), Signal: exit.GetSignal(), Error: exit.GetError()}, nil
		}
		if err != nil {
			return ExitStatus{}, c.lost("exec in "+cmd.Box, err, true)
		}
		stdout := cmd.Stdout
		if dropStdout.Load() {
			stdout = nil
		}
		switch chunk.Field {
		case stdoutField:
			err = write(stdout, chunk.Data)
		case stderrField:
			err = write(cmd.Stderr, chunk.Data)
		default:
			switch m := r.GetMsg().(type) {
			case *controlv1.ExecResponse_Stdout:
				err = write(stdout, m.Stdout)
			case *controlv1.ExecResponse_Stderr:
				err = write(cmd.Stderr, m.Stderr)
			case *controlv1.ExecResponse_Exit:
				exit = m.Exit
			}
		}
		chunk.Free()
		if err != nil {
			return ExitStatus{}, err
		}
	}
}

func write(w io.Writer, b []byte) error {
	if w == nil || len(b) == 0 {
		return nil
	}
	if _, err := w.Write(b); err != nil {
		return &WriteError{Err: err}
	}
	return nil
}

// stream serialises sends: gRPC allows one sender at a time.
type stream struct {
	mu sync.Mutex
	st controlv1.Session_ExecClient
	c  *Client
	// execID names the Exec for Session.Signal; empty if the server gave none.
	execID string
}

func (s *stream) send(r *controlv1.ExecRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Send(r)
}

// stdinLender is a command's stdin that lends its bytes instead of
// copying them into a buffer of Read's (a resumable session's attempt,
// whose stdin waits in its ring until the box acknowledges it).
type stdinLender interface {
	// lend returns the next chunk, at most max bytes in all, as pieces
	// that stay unchanged until the transport has written them; io.EOF
	// (or another error) once there is no more.
	lend(max int) ([][]byte, error)
}

// stdinField is the number of ExecRequest's stdin.
var stdinField = bufpool.FieldNumber(&controlv1.ExecRequest{}, "stdin")

// sendParts sends one stdin message whose bytes are parts, which the
// message refers to rather than copies (bufpool.Raw).
func (s *stream) sendParts(parts [][]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	prefix := protowire.AppendTag(make([]byte, 0, 16), stdinField, protowire.BytesType)
	prefix = protowire.AppendVarint(prefix, uint64(n))
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.SendMsg(append(bufpool.Raw{prefix}, parts...))
}

// pumpStdin sends in to the command, first what first read (if it was
// not sent with the start), then chunk by chunk, and closes the remote
// stdin at in's end.
func (s *stream) pumpStdin(in io.Reader, first *firstChunk) {
	if first != nil {
		first.wait()
		if first.send(s.send) != nil || first.closed {
			return
		}
		if first.got.err != nil {
			in = nil
		}
	}
	if l, ok := in.(stdinLender); ok {
		for {
			parts, err := l.lend(chunkSize)
			if len(parts) > 0 && s.sendParts(parts) != nil {
				return
			}
			if err != nil {
				break
			}
		}
		in = nil
	}
	if in != nil {
		buf := make([]byte, chunkSize)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				// SendMsg has encoded the message when it returns, and no stats
				// handler keeps it, so buf can be reused.
				if s.send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_Stdin{Stdin: buf[:n]}}) != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
	}
	s.send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_CloseStdin{CloseStdin: &controlv1.CloseStdin{}}})
}

func (s *stream) pumpControl(ctx context.Context, signals <-chan string, resizes <-chan Size) {
	for {
		var r *controlv1.ExecRequest
		select {
		case <-ctx.Done():
			return
		case name, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			if s.execID != "" {
				// Out of band: the stream may be held up behind stdin the
				// command has not read, as ssh's channel requests are not.
				go s.c.session.Signal(ctx, &controlv1.SignalRequest{ExecId: s.execID, Name: name})
				continue
			}
			r = &controlv1.ExecRequest{Msg: &controlv1.ExecRequest_Signal{Signal: &controlv1.Signal{Name: name}}}
		case sz, ok := <-resizes:
			if !ok {
				resizes = nil
				continue
			}
			r = &controlv1.ExecRequest{Msg: &controlv1.ExecRequest_Resize{Resize: &controlv1.Resize{Rows: sz.Rows, Cols: sz.Cols}}}
		}
		if err := s.send(r); err != nil && !errors.Is(err, io.EOF) {
			return
		}
	}
}
