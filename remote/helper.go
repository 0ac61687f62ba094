// Package remote is git's remote helper for cocoonbox URLs: the helper
// protocol (git's Documentation/gitremote-helpers.txt, as transport-helper.c
// speaks it) over plain io, and the cocoonbox:: URL grammar. A connect runs
// the git service in the box with one Exec and splices it to git.
package remote

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/cocoonbox/cocoonbox/box"
)

// The services git connects to (gitremote-helpers "connect").
const (
	UploadPack    = "git-upload-pack"
	ReceivePack   = "git-receive-pack"
	UploadArchive = "git-upload-archive"
)

// Execer runs one command in a box; *box.Client is one.
type Execer interface {
	Exec(ctx context.Context, cmd *box.Command) (box.ExitStatus, error)
}

// Helper is one run of the remote helper. Set the fields, then call Run.
type Helper struct {
	// URL is git's second argument: what follows "cocoonbox::", or a whole
	// cocoonbox:// URL (ParseURL).
	URL string
	// Dial makes the client; it is called once, at connect, beside
	// ProtocolVersion.
	Dial func() (Execer, error)
	// ProtocolVersion returns the user's protocol.version (0, 1 or 2, git
	// config's default being 2); it is called at connect. Nil means 2.
	ProtocolVersion func() (int, error)
	// Stderr receives the service's stderr, and the box's wake progress
	// when git asked for progress. Nil discards them.
	Stderr io.Writer
	// Logf, if not nil, gets notes for git's -v: what runs where.
	Logf func(format string, args ...any)

	verbosity int
	progress  bool
	servpath  string
}

// ExitError is a service that did not exit 0. What it said on stderr has
// already gone to Helper.Stderr.
type ExitError struct {
	// Service is the program that ran, such as git-upload-pack.
	Service string
	// Box is the box it ran in.
	Box string
	// Status is how it ended.
	Status box.ExitStatus
	// Init, when the service said the path is not a repository, is the
	// command line that creates it (Repo.InitCommand); else empty.
	Init string
}

func (e *ExitError) Error() string {
	what := e.Status.Text()
	if e.Status.Error == "" && e.Status.Signal != "" {
		// Not Text's "killed by SIGNAME": git-remote-cocoonbox has always
		// said "killed by signal NAME", and its messages do not change here.
		what = "killed by signal " + e.Status.Signal
	}
	return fmt.Sprintf("%s in box %s: %s", e.Service, e.Box, what)
}

// Run speaks the helper protocol: git's commands come on in, answers go
// to out, and after a connect the two carry the service's bytes and
// nothing else. It returns nil when git ends the conversation or the
// service exits 0; an *ExitError when the service fails; a
// *box.WriteError when git stops reading; any other error is ours, and
// if it comes before the blank line that accepts a connect, git has been
// told nothing (the helper never answers "fallback").
func (h *Helper) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	h.verbosity, h.progress = 1, false
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			return nil
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read git's command: %w", err)
		}
		line = strings.TrimSuffix(line, "\n")
		cmd, arg, _ := strings.Cut(line, " ")
		var answer string
		switch cmd {
		case "":
			return nil
		case "capabilities":
			answer = "connect\noption\n\n"
		case "option":
			answer = h.option(arg) + "\n"
		case "connect":
			return h.connect(ctx, arg, r, out)
		default:
			return fmt.Errorf("git sent %q, which this helper does not know", line)
		}
		if _, err := io.WriteString(out, answer); err != nil {
			return &box.WriteError{Err: err}
		}
	}
}

// option sets one of git's options and returns the answer: ok, unsupported,
// or error with the reason.
func (h *Helper) option(arg string) string {
	name, value, _ := strings.Cut(arg, " ")
	switch name {
	case "verbosity":
		n, err := strconv.Atoi(value)
		if err != nil {
			return "error verbosity is not a number"
		}
		h.verbosity = n
	case "progress":
		switch value {
		case "true":
			h.progress = true
		case "false":
			h.progress = false
		default:
			return "error progress is true or false"
		}
	case "servpath":
		// git c-quotes a value that needs it (transport-helper.c
		// set_helper_option).
		if strings.HasPrefix(value, `"`) {
			v, err := strconv.Unquote(value)
			if err != nil {
				return "error servpath is not a quoted string"
			}
			value = v
		}
		h.servpath = value
	default:
		return "unsupported"
	}
	return "ok"
}

// protocolEnv is what git's own ssh transport sends as GIT_PROTOCOL
// (connect.c git_connect): version 2 only to upload-pack, as git knows no
// other service over v2, and any version above 0 as is.
func protocolEnv(version int, service string) map[string]string {
	if version == 2 && service != UploadPack {
		version = 0
	}
	if version == 0 {
		return nil
	}
	return map[string]string{"GIT_PROTOCOL": fmt.Sprintf("version=%d", version)}
}

func (h *Helper) connect(ctx context.Context, service string, in *bufio.Reader, out io.Writer) error {
	switch service {
	case UploadPack, ReceivePack, UploadArchive:
	default:
		return fmt.Errorf("git asked to connect to %q; this helper runs %s, %s and %s", service, UploadPack, ReceivePack, UploadArchive)
	}
	repo, err := ParseURL(h.URL)
	if err != nil {
		return err
	}
	// The dial and the read of protocol.version (a git of its own) go
	// side by side.
	type dialed struct {
		c   Execer
		err error
	}
	dial := make(chan dialed, 1)
	go func() {
		c, err := h.Dial()
		dial <- dialed{c, err}
	}()
	version := 2
	if h.ProtocolVersion != nil {
		version, err = h.ProtocolVersion()
	}
	d := <-dial
	if err != nil {
		return err
	}
	if d.err != nil {
		return d.err
	}
	c := d.c
	prog := service
	if h.servpath != "" {
		// As git's ssh transport: --upload-pack and friends are shell words
		// of the user's own choosing.
		prog = h.servpath
	}
	cmd := &box.Command{
		Box:  repo.Box,
		Line: repo.Command(prog),
		Env:  protocolEnv(version, service),
	}
	if h.Logf != nil && h.verbosity >= 2 {
		v := "0"
		if p, ok := strings.CutPrefix(cmd.Env["GIT_PROTOCOL"], "version="); ok {
			v = p
		}
		h.Logf("box %s: %s (protocol v%s)", repo.Box, cmd.Line, v)
	}
	acc := &accept{out: out, started: make(chan struct{})}
	var missing bool
	cmd.Started = acc.start
	cmd.Stdin = &acceptReader{ctx, acc, in}
	// upload-archive reports a missing repository through the protocol.
	cmd.Stdout = &watch{w: &acceptWriter{acc, out}, limit: 4 << 10, seen: &missing}
	cmd.Stderr = &watch{w: h.Stderr, seen: &missing}
	if h.progress {
		cmd.Progress = h.Stderr
	}
	st, err := c.Exec(ctx, cmd)
	if err != nil {
		return err
	}
	// A service that ended before reading or writing a byte has still run:
	// git must get the blank line, then EOF.
	if err := acc.do(); err != nil {
		return err
	}
	if st == (box.ExitStatus{}) {
		return nil
	}
	e := &ExitError{Service: prog, Box: repo.Box, Status: st}
	if missing {
		e.Init = repo.InitCommand()
	}
	return e
}

// accept writes the blank line that accepts a connect exactly once, when
// the command is known to have started (box.Command.Started), or when the
// service's first bytes come, which cannot be earlier. git sends nothing
// before it, so stdin is read only after it: box.Client.Exec reads the
// first chunk while the start is on its way, and a box that refused the
// start must not have been accepted.
type accept struct {
	once    sync.Once
	out     io.Writer
	err     error
	started chan struct{}
}

func (a *accept) do() error {
	a.once.Do(func() {
		if _, err := io.WriteString(a.out, "\n"); err != nil {
			a.err = &box.WriteError{Err: err}
		}
	})
	return a.err
}

// start accepts the connect and lets stdin be read.
func (a *accept) start() {
	a.do()
	close(a.started)
}

type acceptReader struct {
	ctx context.Context
	a   *accept
	r   io.Reader
}

func (r *acceptReader) Read(p []byte) (int, error) {
	select {
	case <-r.a.started:
	case <-r.ctx.Done():
		return 0, r.ctx.Err()
	}
	if err := r.a.do(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

type acceptWriter struct {
	a *accept
	w io.Writer
}

func (w *acceptWriter) Write(p []byte) (int, error) {
	if err := w.a.do(); err != nil {
		return 0, errors.Unwrap(err)
	}
	return w.w.Write(p)
}

// notRepo is what git-upload-pack, git-receive-pack and git-upload-archive
// die with when the path is not a repository (enter_repo fails); git does
// not translate it.
const notRepo = "does not appear to be a git repository"

// watch passes writes through and sets *seen when they carry notRepo,
// looking at the first limit bytes only when limit > 0. Exec writes stdout
// and stderr from one goroutine, so two watches can share seen.
type watch struct {
	w     io.Writer
	limit int
	seen  *bool
	n     int
	tail  []byte
}

func (w *watch) Write(p []byte) (int, error) {
	if scan := p; w.limit == 0 || w.n < w.limit {
		if w.limit > 0 && len(scan) > w.limit-w.n {
			scan = scan[:w.limit-w.n]
		}
		w.n += len(scan)
		buf := append(w.tail, scan...)
		if strings.Contains(string(buf), notRepo) {
			*w.seen = true
		}
		if k := len(notRepo) - 1; len(buf) > k {
			buf = buf[len(buf)-k:]
		}
		w.tail = append(w.tail[:0], buf...)
	}
	if w.w == nil {
		return len(p), nil
	}
	return w.w.Write(p)
}
