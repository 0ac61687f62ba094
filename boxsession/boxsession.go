// Package boxsession is the box half of sessions that outlive their Exec
// stream (docs/cocoonbox-agent.md "session"): a holder process of the box
// user's, one per box, runs each session's command (pipes), keeps the
// output its client has not acknowledged (bounded), and keeps the
// command for a resume window while no client is attached; each Exec of
// `cocoonbox-agent session open|attach` connects its stdin and stdout to
// one session through the holder's socket. The framing is
// internal/sessionwire's.
package boxsession

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/flock"
	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"
)

// DefaultBound is how many bytes of each output stream a session keeps
// that its client has not acknowledged; past it the command's writes wait.
// It is the client's stream window (internal/window.Stream), so that a
// session's output is limited by the window over the round trip as a
// plain Exec's (4 MiB held a download at 50 ms to 84 MB/s).
const DefaultBound = 16 << 20

// idleExit is how long a holder with no session and no client lives on.
const idleExit = time.Minute

// request is what an attacher sends the holder first, as one JSON line.
type request struct {
	// Op is "open" (start the command, or attach if the id runs),
	// "attach", or "list" (the sessions, as JSON lines: sessionwire.Info).
	Op     string        `json:"op"`
	ID     string        `json:"id"`
	Window time.Duration `json:"window,omitempty"`
	Line   string        `json:"line,omitempty"`
	Env    []string      `json:"env,omitempty"`
	Dir    string        `json:"dir,omitempty"`
	// FDs says the attacher's stdin and stdout (the Exec's streams) rode
	// along with the request: the holder reads and writes them itself,
	// and the socket only says when the attacher is gone.
	FDs bool `json:"fds,omitempty"`
	// TTY, on an open, runs the command on a terminal the holder keeps.
	TTY *TTY `json:"tty,omitempty"`
	// Owner is the attaching client's token: an attach whose Owner is
	// not the session's is refused (another client took the session),
	// unless Take, which makes Owner the session's.
	Owner string `json:"owner,omitempty"`
	Take  bool   `json:"take,omitempty"`
}

// TTY is the terminal a session's command runs on.
type TTY struct {
	Term       string `json:"term"`
	Rows, Cols uint32
	// Modes are terminal modes in RFC 4254 section 8's encoding.
	Modes []byte `json:"modes,omitempty"`
}

// Holder keeps the sessions of one box user.
type Holder struct {
	// Bound replaces DefaultBound when not zero.
	Bound int
	// Logf, if not nil, receives one line per notable event.
	Logf func(format string, args ...any)

	mu       sync.Mutex
	sessions map[string]*session
	conns    int
	idle     *time.Timer
	// exiting is set once the holder decided to exit: a shell's request
	// is then turned away (takeRequests).
	exiting bool
	// pidPath is the pid file of the shells' way in, "" without it.
	pidPath string
}

func (h *Holder) bound() int {
	if h.Bound > 0 {
		return h.Bound
	}
	return DefaultBound
}

func (h *Holder) logf(format string, args ...any) {
	if h.Logf != nil {
		h.Logf(format, args...)
	}
}

// Serve serves attachers on lis until it has had no session and no
// client for a minute; then it closes lis and returns nil.
func (h *Holder) Serve(lis net.Listener) error {
	h.init(lis)
	for {
		c, err := lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		h.mu.Lock()
		h.conns++
		h.mu.Unlock()
		go func() {
			h.serveConn(c)
			h.mu.Lock()
			h.conns--
			h.idle.Reset(idleExit)
			h.mu.Unlock()
		}()
	}
}

// init readies h to serve, exiting by closing lis once idle; once.
func (h *Holder) init(lis net.Listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions == nil {
		h.sessions = map[string]*session{}
		h.idle = time.AfterFunc(idleExit, func() { h.maybeExit(lis) })
	}
}

func (h *Holder) maybeExit(lis net.Listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.sessions) == 0 && h.conns == 0 {
		h.exiting = true
		lis.Close()
		return
	}
	h.idle.Reset(idleExit)
}

func (h *Holder) forget(id string) {
	h.mu.Lock()
	delete(h.sessions, id)
	h.mu.Unlock()
}

func (h *Holder) serveConn(c net.Conn) {
	first := make([]byte, 16<<10)
	n, files, err := readFirst(c, first)
	r := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(first[:n]), c), 16<<10)
	line, err := r.ReadBytes('\n')
	var req request
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	if err == nil && req.Op == "list" {
		closeFiles(files)
		h.list(c)
		c.Close()
		return
	}
	if err != nil || req.ID == "" || req.FDs != (len(files) == 2) {
		closeFiles(files)
		c.Close()
		return
	}
	l := &link{c: c, r: r, w: c}
	if req.FDs {
		l.r, l.w, l.files = files[0], files[1], files
	}
	h.serveLink(l, &req)
}

// serveLink starts or finds req's session and serves attachment l until
// it ends.
func (h *Holder) serveLink(l *link, req *request) {
	var err error
	h.mu.Lock()
	s := h.sessions[req.ID]
	h.mu.Unlock()
	fresh := false
	if s == nil && req.Op == "open" {
		fresh = true
		if s, err = h.start(req); err != nil {
			fail(l, fmt.Sprintf("start %s: %v", req.Line, err))
			return
		}
		h.mu.Lock()
		h.sessions[req.ID] = s
		h.mu.Unlock()
		h.logf("session %s: started", req.ID)
	}
	if s == nil {
		fail(l, "no session "+req.ID+" in this box: its command has ended")
		return
	}
	if !fresh && !s.claim(req.Owner, req.Take) {
		fail(l, "session "+req.ID+" was taken over by another client (cocoonbox rsh --attach)")
		return
	}
	s.attach(l, req.Op != "open" || !fresh)
}

// fail says why on the socket (an attacher that passed its streams
// relays it), or on the Exec's stdout taken from a shell, and ends the
// attachment.
func fail(l *link, why string) {
	var w io.Writer = l.c
	if l.c == nil {
		w = l.w
	}
	w.Write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Fail, Text: why}))
	l.close()
}

// link is one attachment: frames come from r and go to w, the socket c
// itself or the Exec's streams (files) that rode along on it, or that
// were taken from the shell of pidfd pid (c nil: takeRequests).
type link struct {
	c     net.Conn
	r     io.Reader
	w     io.Writer
	files []*os.File
	pid   *os.File
	once  sync.Once
	// noSplice is set once splice(2) refused the Exec's stdin (not a
	// pipe); before waitAfter spliceIn does not wait for the command.
	noSplice  bool
	waitAfter time.Time
}

// close ends the attachment: the streams first, so that the attacher,
// which exits when the socket ends, or the shell, told to exit, leaves
// none of the Exec's open.
func (l *link) close() {
	l.once.Do(func() {
		closeFiles(l.files)
		if l.c != nil {
			l.c.Close()
		}
		if l.pid != nil {
			endShell(l.pid)
			l.pid.Close()
		}
	})
}

// await returns when the Exec of an attachment with files ended: its
// attacher closed the socket, or its shell exited; false when that
// cannot be known (the Exec's stdin's end says it then).
func (l *link) await() bool {
	if l.pid != nil {
		return awaitExit(l.pid)
	}
	io.Copy(io.Discard, l.c)
	return true
}

// Dir is the directory of the holder's socket for the box's environment
// getenv: $COCOONBOX_RUN_DIR/sessions, else $XDG_RUNTIME_DIR's, else one
// of the user's under the temporary directory.
func Dir(getenv func(string) string) string {
	if d := getenv("COCOONBOX_RUN_DIR"); d != "" {
		return filepath.Join(d, "cocoonbox-sessions")
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "cocoonbox-sessions")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("cocoonbox-sessions-%d", os.Getuid()))
}

// Run is the holder process: it takes dir's lock (waiting for a holder
// that is exiting), listens on dir's socket and serves until idle.
func Run(dir string, logf func(string, ...any)) error {
	if err := privateDir(dir); err != nil {
		return err
	}
	release, err := flock.Hold(filepath.Join(dir, "holder.lock"), flock.Exclusive)
	if err != nil {
		return err
	}
	defer release()
	sock := filepath.Join(dir, "holder.sock")
	os.Remove(sock)
	lis, err := unixsock.Listen(sock)
	if err != nil {
		return err
	}
	defer lis.Close()
	h := &Holder{Logf: logf}
	h.init(lis)
	if stop := h.takeRequests(dir); stop != nil {
		defer stop()
	}
	return h.Serve(lis)
}

// privateDir makes dir 0700 if missing and checks that it is a directory
// of ours no one else can write.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	return checkPrivate(dir, fi)
}

// checkPrivate refuses dir (its Lstat fi) unless it is a directory of this
// user's that no one else can enter: a holder.sock in anyone else's
// reach could be a stranger's, who would get each open's environment,
// command line and streams.
func checkPrivate(dir string, fi os.FileInfo) error {
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || !ownedByMe(fi) {
		return fmt.Errorf("%s: not a private directory of this user's; remove it", dir)
	}
	return nil
}

// Attach connects stdin and stdout to session req through the holder in
// dir, starting the holder (self with args) when none serves, and returns
// when the holder closes the connection (the session is over, or moved to
// another attachment) or stdout fails.
func attach(dir string, self string, holderArgs []string, req request, stdin io.Reader, stdout io.Writer) error {
	// The directory first: a socket there is trusted only when no one
	// else could have put it there.
	if err := privateDir(dir); err != nil {
		return err
	}
	sock := filepath.Join(dir, "holder.sock")
	c, err := unixsock.Dial(sock)
	if err != nil {
		cmd := exec.Command(self, holderArgs...)
		proc.NewSession(cmd)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start the session holder: %w", err)
		}
		go cmd.Wait()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			if c, err = unixsock.Dial(sock); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the session holder did not come up: %w", err)
			}
		}
	}
	defer c.Close()
	if err := checkPeer(c, sock); err != nil {
		return err
	}
	in, inFile := stdin.(*os.File)
	out, outFile := stdout.(*os.File)
	if inFile && outFile {
		req.FDs = true
		line, _ := json.Marshal(req)
		sent, err := sendWithFiles(c, append(line, '\n'), in, out)
		if err != nil {
			return err
		}
		if sent {
			// The holder has the streams; the socket carries only a fail
			// and ends when the attachment does.
			_, err = io.Copy(stdout, c)
			return err
		}
		req.FDs = false
	}
	line, _ := json.Marshal(req)
	if _, err := c.Write(append(line, '\n')); err != nil {
		return err
	}
	go func() {
		io.Copy(c, stdin)
		if uc, ok := c.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
	}()
	_, err = io.Copy(stdout, c)
	return err
}

// Open runs line (empty: a login shell) as session id, kept for window
// while detached, with this process's environment and directory, and
// connects stdin and stdout to it; if id runs already it attaches.
// self and holderArgs start the holder when none serves.
func Open(dir, self string, holderArgs []string, id string, window time.Duration, line string, stdin io.Reader, stdout io.Writer) error {
	wd, _ := os.Getwd()
	return attach(dir, self, holderArgs, request{Op: "open", ID: id, Window: window, Line: line, Env: os.Environ(), Dir: wd}, stdin, stdout)
}

// Attach connects stdin and stdout to the running session id.
func Attach(dir, self string, holderArgs []string, id string, stdin io.Reader, stdout io.Writer) error {
	return AttachAs(dir, self, holderArgs, id, "", false, stdin, stdout)
}

// AttachAs is Attach as the client owner; take makes owner the session's
// client, so that the attaches of its previous client are refused.
func AttachAs(dir, self string, holderArgs []string, id, owner string, take bool, stdin io.Reader, stdout io.Writer) error {
	return attach(dir, self, holderArgs, request{Op: "attach", ID: id, Owner: owner, Take: take}, stdin, stdout)
}

// OpenTTY is Open with the command on terminal tty.
func OpenTTY(dir, self string, holderArgs []string, id string, window time.Duration, tty *TTY, line string, stdin io.Reader, stdout io.Writer) error {
	wd, _ := os.Getwd()
	return attach(dir, self, holderArgs, request{Op: "open", ID: id, Window: window, Line: line, Env: os.Environ(), Dir: wd, TTY: tty}, stdin, stdout)
}

// List writes the sessions of the holder in dir to out, one JSON sessionwire.Info a
// line; none when no holder runs.
func List(dir string, out io.Writer) error {
	fi, err := os.Lstat(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := checkPrivate(dir, fi); err != nil {
		return err
	}
	sock := filepath.Join(dir, "holder.sock")
	c, err := unixsock.Dial(sock)
	if err != nil {
		return nil
	}
	defer c.Close()
	if err := checkPeer(c, sock); err != nil {
		return err
	}
	line, _ := json.Marshal(request{Op: "list"})
	if _, err := c.Write(append(line, '\n')); err != nil {
		return err
	}
	_, err = io.Copy(out, c)
	return err
}

// list writes every session's sessionwire.Info to w.
func (h *Holder) list(w io.Writer) {
	h.mu.Lock()
	ss := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		ss = append(ss, s)
	}
	h.mu.Unlock()
	enc := json.NewEncoder(w)
	for _, s := range ss {
		enc.Encode(s.info())
	}
}
