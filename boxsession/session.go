package boxsession

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
)

// session is one command the holder keeps, with what its client has not
// acknowledged.
type session struct {
	h      *Holder
	id     string
	window time.Duration
	cmd    *exec.Cmd
	stdin  io.WriteCloser

	mu   sync.Mutex
	cond *sync.Cond
	// out are stdout and stderr: out[i] holds the bytes the client has
	// not acknowledged; sent is how far the current attachment has sent.
	out [2]outBuf
	// in is stdin received and not yet written to the command: its Base
	// is the offset written, its End the offset received; inEOF is where
	// the client closed it (-1: open).
	in    sessionwire.Ring
	inEOF int64
	// stdinFile is the command's stdin pipe (nil on a terminal): while
	// the ring is empty a Data frame is written to it at once (direct
	// is set while that runs; directWait counts who waits for its end).
	stdinFile  *os.File
	direct     bool
	directWait int
	// exit is set once the command has exited and its output ended.
	exit *sessionwire.Frame
	// conn is the current attachment, nil while detached; gen counts them.
	conn *link
	gen  int
	// w writes to the current attachment once its client said where its
	// output stands (nil before, and while detached); a goroutine writes
	// to it only while it holds w.busy, and tokenWait counts those that
	// wait for it.
	w         *connWriter
	tokenWait int
	// inAcked is the stdin offset the current attachment was last told.
	inAcked uint64
	// done is set when the session is over (bye, window, kill after exit).
	done  bool
	timer *time.Timer
	// closeOut is set when the client reads no more stdout.
	closeOut bool
	// sigs counts the Signal frames taken from the current attachment
	// and those before it (sessionwire.Signals).
	sigs  uint64
	pipes [2]*os.File

	// tty is a terminal session's terminal (its master side), nil for
	// pipes; line, started and detached describe it to a listing; owner
	// is the client token attaches must carry.
	tty      *os.File
	line     string
	started  time.Time
	detached time.Time
	owner    string
}

type outBuf struct {
	sessionwire.Ring
	sent uint64
	eof  bool
}

// maxFrame bounds the payload of a Data frame the holder sends, in bytes.
const maxFrame = sessionwire.MaxPayload

// inAckEvery is how much stdin written to the command the holder
// acknowledges at once (and at stdin's end; a terminal's at each write):
// an ack per write cost a frame through the Exec and the client per
// chunk of an upload. The client keeps what is not acknowledged and
// sends it again on a resume, which skips what the command has.
const inAckEvery = 256 << 10

// exitedWindow bounds how long an exited session waits for its client.
const exitedWindow = 2 * time.Minute

// killDelay is how long a command's group has between SIGHUP and SIGKILL.
const killDelay = 2 * time.Second

func (h *Holder) start(req *request) (*session, error) {
	if req.TTY != nil {
		return h.startTTY(req)
	}
	shell := envOf(req.Env, "SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	viaShell := func() *exec.Cmd {
		cmd := &exec.Cmd{Path: shell, Dir: req.Dir, Env: req.Env}
		if req.Line == "" {
			cmd.Args = []string{"-" + filepath.Base(shell)}
		} else {
			cmd.Args = []string{filepath.Base(shell), "-c", req.Line}
		}
		return cmd
	}
	// The box's shell ran once already for the Exec: a line it would
	// only run one program for starts without a second.
	cmd := viaShell()
	if path, args := directCommand(shell, req.Line, req.Dir, req.Env); path != "" {
		env := req.Env
		if filepath.Base(shell) == "bash" {
			// As bash sets it for the program it runs.
			env = append(env[:len(env):len(env)], "_="+path)
		}
		cmd = &exec.Cmd{Path: path, Args: args, Dir: req.Dir, Env: env}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// As large as the Exec's own: a client's frame (up to 128 KiB) then
	// goes to the command from the frame, not through the ring.
	proc.GrowPipe(inW, 1<<20)
	var ours, theirs [2]*os.File
	for i := range ours {
		r, w, err := os.Pipe()
		if err != nil {
			inR.Close()
			inW.Close()
			closeFiles(ours[:i])
			closeFiles(theirs[:i])
			return nil, err
		}
		proc.GrowPipe(r, 1<<20)
		ours[i], theirs[i] = r, w
	}
	start := func(cmd *exec.Cmd) error {
		proc.NewSession(cmd)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, theirs[0], theirs[1]
		return cmd.Start()
	}
	err = start(cmd)
	if err != nil && cmd.Path != shell {
		// Not a program after all (a script without #!, gone since the
		// lookup): the shell runs the line as it would have.
		cmd = viaShell()
		err = start(cmd)
	}
	inR.Close()
	closeFiles(theirs[:])
	if err != nil {
		inW.Close()
		closeFiles(ours[:])
		return nil, err
	}
	s := &session{h: h, id: req.ID, window: req.Window, cmd: cmd, stdin: inW, stdinFile: inW, inEOF: -1, pipes: ours,
		line: req.Line, started: time.Now(), owner: req.Owner}
	s.in.Limit = h.bound()
	for i := range s.out {
		s.out[i].Limit = h.bound()
	}
	s.cond = sync.NewCond(&s.mu)
	var pumps sync.WaitGroup
	for i, f := range ours {
		pumps.Add(1)
		go func() {
			defer pumps.Done()
			s.pump(i, f)
		}()
	}
	go s.feed()
	go func() {
		pumps.Wait()
		err := cmd.Wait()
		x := exitFrame(cmd.ProcessState, err)
		s.mu.Lock()
		s.exit = &x
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	return s, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

func envOf(env []string, k string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if len(env[i]) > len(k) && env[i][:len(k)] == k && env[i][len(k)] == '=' {
			return env[i][len(k)+1:]
		}
	}
	return ""
}

func exitFrame(ps *os.ProcessState, err error) sessionwire.Frame {
	if ps == nil {
		return sessionwire.Frame{Type: sessionwire.Exit, Code: 255, Text2: err.Error()}
	}
	if sig := proc.ExitSignal(ps); sig != "" {
		return sessionwire.Frame{Type: sessionwire.Exit, Text: sig}
	}
	return sessionwire.Frame{Type: sessionwire.Exit, Code: int32(ps.ExitCode())}
}

// pump reads output stream i of the command into its ring, in place,
// while what the client has not acknowledged is under the bound: a
// command that writes faster than an absent client reads waits, as under
// ssh's window. Once the session is over the output is read and dropped.
//
// While the attachment has all the output there was and no one else
// writes to it, the pump passes what comes on itself (teeOut): no hand-off
// to the sender, and the bytes go into the Exec's pipe without a copy.
func (s *session) pump(i int, f *os.File) {
	o := &s.out[i]
	var scratch []byte
	for {
		s.mu.Lock()
		var sp []byte
		for !s.done {
			if sp = o.Space(); sp != nil {
				break
			}
			s.cond.Wait()
		}
		dropping := s.done
		if dropping {
			if scratch == nil {
				scratch = make([]byte, 32<<10)
			}
			sp = scratch
		}
		s.mu.Unlock()
		var n int
		var err error
		if dropping || s.tty != nil {
			n, err = f.Read(sp)
		} else {
			var avail int
			avail, n, err = pending(f, sp)
			if avail > 0 {
				if s.teeOut(i, f, sp[:min(avail, len(sp), maxFrame)]) {
					continue
				}
				n, err = f.Read(sp)
			}
		}
		s.mu.Lock()
		if n > 0 && !dropping {
			o.Commit(n)
			if i == 0 && s.closeOut {
				o.Drop(o.End())
			}
		}
		if err != nil {
			o.eof = true
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		if err != nil {
			f.Close()
			return
		}
	}
}

// errNoTee is tee's error when a file is not a pipe.
var errNoTee = errors.New("not a pipe")

// teed counts the bytes teeOut passed on by tee, directIn those of stdin
// written to the command from their frame, splicedIn those spliceIn moved
// (for tests).
var teed, directIn, splicedIn atomic.Int64

// teeOut sends the len(sp) bytes at the front of pipe f, output stream i,
// to the attachment as one Data frame, and takes them into the ring (sp,
// its room after End): the frame's payload is tee'd from f into the
// Exec's pipe, then read into the ring. It reports false, having done
// nothing, unless the attachment has all of stream i there was, its turn
// to write is free and its stdout is a pipe.
func (s *session) teeOut(i int, f *os.File, sp []byte) bool {
	o := &s.out[i]
	s.mu.Lock()
	w := s.w
	if w == nil || w.out == nil || w.noTee || w.busy || w.err != nil || o.sent != o.End() || i == 0 && s.closeOut {
		s.mu.Unlock()
		return false
	}
	w.busy = true
	off := o.End()
	s.mu.Unlock()
	defer s.release(w)
	var hdr [32]byte
	if !w.write(sessionwire.AppendDataHeader(hdr[:0], byte(i+1), off, len(sp))) {
		// The attachment is gone: the bytes stay in f for the next.
		return true
	}
	left := sp
	for len(left) > 0 {
		t, err := tee(f, w.out, len(left))
		if t == 0 || err != nil {
			if errors.Is(err, errNoTee) {
				w.noTee = true
			}
			// The frame is promised: its rest is read and written as
			// bytes (or as zeros when f was closed: stdout's end, whose
			// bytes the client drops).
			nr, _ := io.ReadFull(f, left)
			clear(left[nr:])
			w.write(left)
			s.commitSent(i, w, nr)
			return true
		}
		nr, _ := io.ReadFull(f, left[:t])
		s.commitSent(i, w, nr)
		teed.Add(int64(t))
		left = left[t:]
	}
	return true
}

// commitSent adds n bytes read into stream i's ring and sent to the
// attachment of w: sent with them, unless another attachment came.
func (s *session) commitSent(i int, w *connWriter, n int) {
	o := &s.out[i]
	s.mu.Lock()
	o.Commit(n)
	if s.w == w {
		o.sent = o.End()
	} else {
		// The new attachment's sender sends them.
		s.cond.Broadcast()
	}
	if i == 0 && s.closeOut {
		o.Drop(o.End())
	}
	s.mu.Unlock()
}

// feed writes stdin to the command as it comes, from its ring in place.
func (s *session) feed() {
	for {
		s.mu.Lock()
		for (s.in.Len() == 0 || s.direct) && !(s.inEOF >= 0 && uint64(s.inEOF) == s.in.Base()) && !s.done {
			s.cond.Wait()
		}
		if s.in.Len() == 0 {
			s.mu.Unlock()
			s.stdin.Close()
			return
		}
		b := s.in.Peek(s.in.Base(), 256<<10)
		s.mu.Unlock()
		_, err := s.stdin.Write(b)
		s.mu.Lock()
		if err != nil {
			// The command closed its stdin: the rest is dropped, as sshd
			// does, and still acknowledged.
			s.in.Drop(s.in.End())
		} else {
			s.in.Drop(s.in.Base() + uint64(len(b)))
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// attach serves the client on c until c ends: what it sends is applied,
// the output it lacks is sent. The previous attachment, if any, is closed.
//
// On an open the client sends no Resume (it has nothing yet), so that its
// first stdin goes with the Exec's start; on an attach its first frame is
// the Resume that says where its output stands.
func (s *session) attach(l *link, resume bool) {
	s.mu.Lock()
	if s.conn != nil {
		s.conn.close()
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.gen++
	gen := s.gen
	s.conn = l
	s.w = nil
	helloIn := s.in.Base()
	s.inAcked = helloIn
	hello := sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Hello, Off: helloIn, Text: s.id})
	s.mu.Unlock()
	if l.files != nil {
		// The attacher is gone (its Exec ended) when its socket ends; a
		// shell, when it exits.
		go func() {
			if l.await() {
				l.close()
			}
		}()
	}
	w := &connWriter{w: l.w}
	if len(l.files) == 2 && s.tty == nil {
		w.out = l.files[1]
	}
	w.write(hello)
	started := false
	begin := func(f sessionwire.Frame) {
		s.mu.Lock()
		s.ack(0, f.Off)
		s.ack(1, f.Off2)
		for i, off := range []uint64{f.Off, f.Off2} {
			o := &s.out[i]
			o.sent = min(max(off, o.Base()), o.End())
		}
		s.w = w
		s.mu.Unlock()
		started = true
		go s.send(w, gen, helloIn)
	}
	if !resume {
		begin(sessionwire.Frame{Type: sessionwire.Resume})
	}
	var ps sessionwire.Parser
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	var err error
	// spliced: stdin payloads go by splice, so reads stop at a frame's
	// header and its payload's end, leaving the next payload in the pipe;
	// off again at a frame too small to splice.
	spliced := false
	for err == nil {
		var n int
		read := true
		_, _, _, wasIn := ps.InData()
		if st, off, left, in := ps.InData(); in && started && st == sessionwire.Stdin && !l.noSplice && (left >= spliceMin || spliced) {
			if left >= spliceMin {
				moved, rn, rerr := s.spliceIn(l, off, left, gen, buf)
				if moved > 0 {
					ps.Skip(moved)
					spliced = true
					continue
				}
				if rn > 0 || rerr != nil {
					n, err, read = rn, rerr, false
				}
			}
			if read && spliced {
				// The rest of this payload, not the next one's.
				n, err = l.r.Read(buf[:min(left, len(buf))])
				read = false
			}
		}
		if read {
			rb := buf
			if spliced && !wasIn {
				rb = buf[:max(1, sessionwire.DataHeader-ps.Pending())]
			}
			n, err = l.r.Read(rb)
		}
		if perr := ps.Feed(buf[:n], func(f sessionwire.Frame) error {
			if started {
				return s.apply(f, gen)
			}
			if f.Type != sessionwire.Resume {
				return sessionwire.ErrFrame
			}
			begin(f)
			return nil
		}); perr != nil {
			err = perr
		}
		if _, _, left, in := ps.InData(); !wasIn && in && left < spliceMin {
			spliced = false
		}
	}
	l.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	s.conn = nil
	s.w = nil
	s.detached = time.Now()
	s.cond.Broadcast()
	if !s.done {
		// An exited command whose client went without its bye is kept
		// less long: only a client cut as the exit went out comes back.
		window := s.window
		if s.exit != nil {
			window = min(window, exitedWindow)
		}
		s.timer = time.AfterFunc(window, func() { s.expire(gen) })
	}
}

// readBufs are attach's read buffers, 256 KiB each: kept between
// attachments, so that a session's start does not zero a fresh one (and
// the collector collect it).
var readBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// claim reports whether a client with token owner may attach; take
// makes it the session's client.
func (s *session) claim(owner string, take bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if take {
		s.owner = owner
	}
	return s.owner == owner
}

// info describes the session to a listing.
func (s *session) info() sessionwire.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sessionwire.Info{ID: s.id, Line: s.line, Attached: s.conn != nil, StartedMs: s.started.UnixMilli(), Exited: s.exit != nil}
	if s.tty != nil {
		i.Term = envOf(s.cmd.Env, "TERM")
	}
	if s.conn == nil && !s.detached.IsZero() {
		i.DetachedMs = s.detached.UnixMilli()
	}
	return i
}

// ack drops output stream i up to off. s.mu is held.
func (s *session) ack(i int, off uint64) {
	s.out[i].Drop(off)
	s.cond.Broadcast()
}

// apply applies one frame (or piece of a Data frame) from attachment gen's
// client. Stdin waits while its ring is full.
func (s *session) apply(f sessionwire.Frame, gen int) error {
	switch f.Type {
	case sessionwire.Data:
		if f.Stream != sessionwire.Stdin {
			return nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		tried := false
		for s.inEOF < 0 && !s.done && s.gen == gen {
			if s.direct {
				s.directWait++
				s.cond.Wait()
				s.directWait--
				continue
			}
			// What is new in f from where stdin stands, recomputed after
			// each wait: another attachment may have moved it.
			at := s.in.End()
			if f.Off > at || f.Off+uint64(len(f.Data)) <= at {
				return nil
			}
			p := f.Data[at-f.Off:]
			if s.in.Len() == 0 && s.stdinFile != nil && !tried {
				// Nothing waits before it: as much as the command's pipe
				// takes now goes there from the frame, without the ring
				// and the feeder; the rest goes to the ring.
				tried = true
				s.direct = true
				s.mu.Unlock()
				k, err := writeNow(s.stdinFile, p)
				s.mu.Lock()
				s.direct = false
				if err != nil {
					// The command closed its stdin: dropped, as feed does.
					k = len(p)
				} else {
					directIn.Add(int64(k))
				}
				s.in.Advance(k)
				if s.directWait > 0 || s.inAckDue(s.inAcked) {
					s.cond.Broadcast()
				}
				continue
			}
			if s.in.Write(p) > 0 {
				s.cond.Broadcast()
				continue
			}
			s.cond.Wait()
		}
	case sessionwire.EOF:
		if s.tty != nil {
			// A terminal has no end of input (^D is a byte): the end of a
			// client's (its connection dead) leaves it for the next.
			return nil
		}
		s.mu.Lock()
		if f.Off == s.in.End() && s.inEOF < 0 {
			s.inEOF = int64(f.Off)
			s.cond.Broadcast()
		}
		s.mu.Unlock()
	case sessionwire.Ack:
		s.mu.Lock()
		if f.Stream == sessionwire.Stdout || f.Stream == sessionwire.Stderr {
			s.ack(int(f.Stream)-1, f.Off)
		}
		s.mu.Unlock()
	case sessionwire.Signal:
		// Counted for the client, which sends again what an attachment
		// lost; one of an attachment since replaced is not taken (its
		// client has given up on it and counts on the count).
		s.mu.Lock()
		stale := s.gen != gen
		if !stale {
			s.sigs++
			s.cond.Broadcast()
		}
		s.mu.Unlock()
		if sig := proc.SignalNum(f.Text); sig != 0 && !stale {
			s.signal(sig)
		}
	case sessionwire.Resize:
		s.resize(f.Rows, f.Cols)
	case sessionwire.CloseStdout:
		s.mu.Lock()
		s.closeOut = true
		s.out[0].Drop(s.out[0].End())
		s.pipes[0].Close()
		s.cond.Broadcast()
		s.mu.Unlock()
	case sessionwire.Kill:
		s.kill()
	case sessionwire.Bye:
		s.end()
		return io.EOF
	}
	return nil
}

// spliceWait is how long spliceIn waits for the command to take what
// waits for it (the ring, a full pipe) before it leaves the bytes to the
// ring: a command slower than its input makes room within it, while one
// that reads no more has the frames behind (a signal, a kill) read after
// it, as before, with no such wait for a second after.
const spliceWait = 200 * time.Millisecond

// spliceMin is the least of a stdin frame's payload left in the Exec's
// pipe that spliceIn moves; less is read, with the frames after it.
const spliceMin = 32 << 10

// spliceIn moves the next bytes of attachment gen's stdin, those of a
// Data frame at offset off with left bytes to come, from the Exec's pipe
// into the command's (splice(2): the pages move, nothing is copied),
// when they are next for the command and nothing waits in the ring before
// them. It returns how many it moved (as apply's direct write: written
// to the command, acknowledged in inAckEvery steps); or, when the pipe had
// nothing to count yet, what its wait read into buf instead, as a Read
// (n, err); all zero when it did neither, and the caller reads.
func (s *session) spliceIn(l *link, off uint64, left, gen int, buf []byte) (moved, n int, err error) {
	src, ok := l.r.(*os.File)
	if !ok || !haveSplice {
		return 0, 0, nil
	}
	wait := spliceWait
	if time.Now().Before(l.waitAfter) {
		wait = 0
	}
	if !s.drained(off, gen, wait) {
		if wait > 0 {
			l.waitAfter = time.Now().Add(time.Second)
		}
		return 0, 0, nil
	}
	avail, n, err := pending(src, buf[:min(len(buf), left)])
	if avail == 0 {
		return 0, n, err
	}
	if !s.canDirect(off, gen, true) {
		return 0, 0, nil
	}
	k, serr := splice(src, s.stdinFile, min(avail, left), wait)
	if k == 0 && serr == nil && wait > 0 {
		l.waitAfter = time.Now().Add(time.Second)
	}
	s.mu.Lock()
	s.direct = false
	if k > 0 {
		s.in.Advance(k)
		splicedIn.Add(int64(k))
	}
	if s.directWait > 0 || s.inAckDue(s.inAcked) {
		s.cond.Broadcast()
	}
	s.mu.Unlock()
	if errors.Is(serr, errNoTee) {
		l.noSplice = true
	}
	// Another error (the command closed its stdin) is apply's to
	// handle: the bytes are still in the Exec's pipe, read next.
	return k, 0, nil
}

// drained waits up to wait for the feeder to write out the ring, and
// reports whether stdin at off is then the next for the command
// (canDirect): the command that made the ring fill once takes the next
// frames from the Exec's pipe, not through the ring, once it catches up.
func (s *session) drained(off uint64, gen int, wait time.Duration) bool {
	s.mu.Lock()
	if s.in.Len() > 0 && wait > 0 {
		t := time.AfterFunc(wait, func() {
			s.mu.Lock()
			s.cond.Broadcast()
			s.mu.Unlock()
		})
		deadline := time.Now().Add(wait)
		for s.in.Len() > 0 && !s.done && s.gen == gen && time.Now().Before(deadline) {
			s.cond.Wait()
		}
		t.Stop()
	}
	s.mu.Unlock()
	return s.canDirect(off, gen, false)
}

// canDirect reports whether stdin at off, of attachment gen, is the next
// for the command with nothing before it in the ring and no direct write
// under way; claim then marks a direct write under way (s.direct).
func (s *session) canDirect(off uint64, gen int, claim bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.stdinFile != nil && s.tty == nil && s.in.Len() == 0 && off == s.in.End() && !s.direct &&
		s.inEOF < 0 && !s.done && s.gen == gen
	if ok && claim {
		s.direct = true
	}
	return ok
}

// signal sends sig to the command's process group while its leader is
// not reaped.
func (s *session) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exit == nil {
		proc.SignalGroup(s.cmd.Process.Pid, sig)
	}
}

// kill ends the command: SIGHUP to its group, SIGKILL after killDelay.
func (s *session) kill() {
	s.signal(syscall.SIGHUP)
	time.AfterFunc(killDelay, func() { s.signal(syscall.SIGKILL) })
}

// expire ends a session whose client has not come back within the window.
func (s *session) expire(gen int) {
	s.mu.Lock()
	stale := s.gen != gen || s.conn != nil
	s.mu.Unlock()
	if stale {
		return
	}
	s.h.logf("session %s: no client for %s: ending the command", s.id, s.window)
	s.kill()
	s.end()
}

// end forgets the session.
func (s *session) end() {
	s.mu.Lock()
	s.done = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.h.forget(s.id)
}

// send sends the attachment what its client lacks: output from where it
// stands, stdin acks, and the exit after the last output. The output goes
// from the rings in place, each frame's header and payload in one writev.
func (s *session) send(w *connWriter, gen int, ackedIn uint64) {
	var hdr [2][32]byte
	var ctl []byte
	var bufs net.Buffers
	exitSent := false
	// sigsSent is the count of signals the attachment was told: none yet.
	sigsSent := ^uint64(0)
	for {
		s.mu.Lock()
		for s.gen == gen && !s.done && (!s.pending(ackedIn, exitSent) && s.sigs == sigsSent || w.busy) {
			if w.busy {
				s.tokenWait++
				s.cond.Wait()
				s.tokenWait--
				continue
			}
			s.cond.Wait()
		}
		if s.gen != gen || s.done {
			s.mu.Unlock()
			return
		}
		w.busy = true
		bufs, ctl = bufs[:0], ctl[:0]
		if s.sigs != sigsSent {
			sigsSent = s.sigs
			ctl = sessionwire.Append(ctl, sessionwire.Frame{Type: sessionwire.Ack, Stream: sessionwire.Signals, Off: sigsSent})
		}
		for i := range s.out {
			o := &s.out[i]
			o.sent = max(o.sent, o.Base())
			if p := o.Peek(o.sent, maxFrame); len(p) > 0 {
				bufs = append(bufs, sessionwire.AppendDataHeader(hdr[i][:0], byte(i+1), o.sent, len(p)), p)
				o.sent += uint64(len(p))
			}
		}
		if s.inAckDue(ackedIn) {
			ackedIn = s.in.Base()
			s.inAcked = ackedIn
			ctl = sessionwire.Append(ctl, sessionwire.Frame{Type: sessionwire.Ack, Stream: sessionwire.Stdin, Off: ackedIn})
		}
		if len(bufs) == 0 && s.exit != nil && !exitSent {
			ctl = sessionwire.Append(ctl, *s.exit)
			exitSent = true
		}
		if len(ctl) > 0 {
			bufs = append(bufs, ctl)
		}
		s.mu.Unlock()
		ok := w.writev(bufs)
		s.release(w)
		if !ok {
			return
		}
	}
}

// release gives back w's turn to write.
func (s *session) release(w *connWriter) {
	s.mu.Lock()
	w.busy = false
	if s.tokenWait > 0 {
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

// pending reports whether the attachment has something to send. s.mu is
// held.
func (s *session) pending(ackedIn uint64, exitSent bool) bool {
	for i := range s.out {
		if s.out[i].sent < s.out[i].End() {
			return true
		}
	}
	return s.inAckDue(ackedIn) || s.exit != nil && !exitSent
}

// inAckDue reports whether stdin written to the command since acked is
// to be acknowledged now (inAckEvery). s.mu is held.
func (s *session) inAckDue(acked uint64) bool {
	base := s.in.Base()
	return base != acked && (base-acked >= inAckEvery || s.tty != nil || s.inEOF >= 0 && uint64(s.inEOF) == base)
}

// connWriter writes frames to an attachment; false once it failed.
type connWriter struct {
	w   io.Writer
	err error
	// out is w when it is the Exec's stdout a pipe may be tee'd into (a
	// session on pipes); noTee is set once tee failed for it.
	out   *os.File
	noTee bool
	// busy is set while a goroutine writes (guarded by the session's mu).
	busy bool
}

func (w *connWriter) write(b []byte) bool {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
	return w.err == nil
}

// writev writes bufs in one system call where the writer allows.
func (w *connWriter) writev(bufs net.Buffers) bool {
	if w.err == nil {
		w.err = writev(w.w, bufs)
	}
	return w.err == nil
}
