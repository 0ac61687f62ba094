package localbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/rawio"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// chunkSize is the largest output message the server sends, in bytes.
const chunkSize = 512 << 10

// pipeSize is the capacity asked for each pipe to and from a command.
const pipeSize = 1 << 20

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// killDelay is how long a process group has between SIGHUP and SIGKILL
// when its call ends early.
const killDelay = 2 * time.Second

// pipeDelay is how long the server still reads, or writes, a pipe of a
// box process once the process has exited, or once a call that ended
// early has killed its group: the pipe's other end may stay open in a
// process of the box user (one it inherited, or took with pidfd_getfd,
// which any process of the same user may), and that process holds up
// nothing of the server's past pipeDelay.
const pipeDelay = 2 * time.Second

type sessionService struct {
	controlv1.UnimplementedSessionServer
	s *Server

	mu    sync.Mutex
	execs map[string]tracked // by exec_id, while they run
}

// tracked is a running Exec and the account whose box it runs in.
type tracked struct {
	p       running
	account string
}

// track names p, running in a box of account, with a new exec_id for
// Signal; the returned func forgets it.
func (x *sessionService) track(p running, account string) (string, func()) {
	id := make([]byte, 16)
	rand.Read(id)
	key := hex.EncodeToString(id)
	x.mu.Lock()
	if x.execs == nil {
		x.execs = map[string]tracked{}
	}
	x.execs[key] = tracked{p, account}
	x.mu.Unlock()
	return key, func() {
		x.mu.Lock()
		delete(x.execs, key)
		x.mu.Unlock()
	}
}

// Signal delivers a signal outside the Exec stream, so that stdin the
// command has not read cannot hold it up.
func (x *sessionService) Signal(ctx context.Context, req *controlv1.SignalRequest) (*controlv1.SignalResponse, error) {
	x.mu.Lock()
	t, ok := x.execs[req.GetExecId()]
	x.mu.Unlock()
	p := t.p
	// Another account's Exec is not found, as one that has ended.
	if !ok || t.account != caller(ctx).Account {
		return nil, status.Error(codes.NotFound, "no running exec with that id")
	}
	p.signal(req.GetName())
	return &controlv1.SignalResponse{}, nil
}

type execStream = grpc.BidiStreamingServer[controlv1.ExecRequest, controlv1.ExecResponse]

// sender serialises sends: gRPC allows one sender at a time.
type sender struct {
	mu sync.Mutex
	st execStream
}

func (s *sender) send(r *controlv1.ExecResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Send(r)
}

func (x *sessionService) Exec(st execStream) error {
	first, err := st.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "the first message of Exec must be start")
	}
	b, err := x.s.lookup(st.Context(), start.GetBox())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	unregister, ok := b.register(&cancel)
	if !ok {
		return notRunning(b)
	}
	defer unregister()
	// An inbox that died (killed, crashed) comes back with the box's next
	// command, as the inbox unit of a real box is restarted.
	x.s.ensureInbox(b)

	p, err := x.s.eng.exec(b, start)
	if err != nil {
		return err
	}
	out := &sender{st: st}
	execID, forget := x.track(p, b.account)
	defer forget()
	if err := out.send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Started{Started: &controlv1.Started{ExecId: execID}}}); err != nil {
		p.kill()
		p.wait()
		return err
	}

	var pumps sync.WaitGroup
	for _, o := range p.streams() {
		pumps.Add(1)
		go func() {
			defer pumps.Done()
			pump(o.r, o.stderr, out)
		}()
	}
	go x.receive(ctx, st, p, cancel)

	exited := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			p.kill()
		case <-exited:
			return
		}
		// A process that left the group may hold the output (a daemon,
		// or one that took the pipes): the call that went away still
		// ends.
		select {
		case <-time.After(killDelay + pipeDelay):
			p.close()
		case <-exited:
		}
	}()
	// Like sshd, the call ends once the output is drained and the command
	// has exited: a background process holding the pipes keeps it open,
	// until the call goes away.
	pumps.Wait()
	exit := p.wait()
	close(exited)
	p.close()

	if ctx.Err() != nil && st.Context().Err() == nil {
		exit.Error = "the box went to sleep"
	}
	if err := out.send(&controlv1.ExecResponse{Msg: &controlv1.ExecResponse_Exit{Exit: exit}}); err != nil {
		return err
	}
	return nil
}

func exitOf(ps *os.ProcessState, werr error) *controlv1.Exit {
	if ps == nil {
		return &controlv1.Exit{Code: 255, Error: fmt.Sprint(werr)}
	}
	if sig := proc.ExitSignal(ps); sig != "" {
		return &controlv1.Exit{Signal: sig}
	}
	return &controlv1.Exit{Code: int32(ps.ExitCode())}
}

// stdinField is the number of ExecRequest's stdin, received as a
// bufpool.Chunk.
var stdinField = bufpool.FieldNumber(&controlv1.ExecRequest{}, "stdin")

// receive applies the client's messages until the stream ends; a broken
// stream cancels the call.
func (x *sessionService) receive(ctx context.Context, st execStream, p running, cancel context.CancelFunc) {
	r := &controlv1.ExecRequest{}
	chunk := &bufpool.Chunk{Fields: []protowire.Number{stdinField}, Msg: r}
	defer chunk.Free()
	for {
		err := st.RecvMsg(chunk)
		if err == io.EOF {
			p.closeStdin()
			return
		}
		if err != nil {
			cancel()
			return
		}
		if chunk.Field == stdinField {
			p.write(chunk.Data)
			chunk.Free()
			continue
		}
		switch m := r.GetMsg().(type) {
		case *controlv1.ExecRequest_Stdin:
			p.write(m.Stdin)
		case *controlv1.ExecRequest_CloseStdin:
			p.closeStdin()
		case *controlv1.ExecRequest_Signal:
			p.signal(m.Signal.GetName())
		case *controlv1.ExecRequest_Resize:
			p.resize(m.Resize.GetRows(), m.Resize.GetCols())
		case *controlv1.ExecRequest_CloseStdout:
			p.closeStdout()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func pump(r io.Reader, stderr bool, out *sender) {
	buf := make([]byte, chunkSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			m := &controlv1.ExecResponse{}
			if stderr {
				m.Msg = &controlv1.ExecResponse_Stderr{Stderr: buf[:n]}
			} else {
				m.Msg = &controlv1.ExecResponse_Stdout{Stdout: buf[:n]}
			}
			// Send has encoded m when it returns, so buf can be reused. After a
			// failed send the output is still drained, so the process never
			// blocks on a full pipe.
			out.send(m)
		}
		if err != nil {
			return
		}
	}
}

type output struct {
	r      io.ReadCloser
	stderr bool
}

// process is one running command: pipes, or a PTY.
type process struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	tty     *os.File
	outputs []output
	mu      sync.Mutex
	closed  bool // stdin closed
	// ttyClosed is set when tty is closed; mu guards it.
	ttyClosed bool
	// reaped is set (under mu) just before the leader is reaped: its pid,
	// the group's id, may then be any other process's, and no signal
	// goes to the group any more. killAt, if not zero, is when kill's
	// SIGKILL is due.
	reaped bool
	killAt time.Time
}

func (p *process) write(b []byte) {
	p.mu.Lock()
	w := p.stdin
	if p.closed {
		w = nil
	}
	p.mu.Unlock()
	if w != nil {
		// An error means the command closed its stdin; the rest is dropped,
		// as sshd does.
		w.Write(b)
	}
}

func (p *process) closeStdin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.tty == nil {
		p.stdin.Close()
	}
}

// closeStdout closes our end of the command's stdout pipe, as sshd does on
// eow@openssh.com: the command's next write fails with EPIPE, so that `yes`
// under a reader that has gone dies of SIGPIPE. The pump reading it ends;
// a pty stays open, as under sshd.
func (p *process) closeStdout() {
	if p.tty == nil {
		p.outputs[0].r.Close()
	}
}

func (p *process) signal(name string) {
	if sig := proc.SignalNum(name); sig != 0 {
		p.signalGroup(sig)
	}
}

// signalGroup sends sig to the command's process group (it leads its own
// session, so its pid is the group's id), unless the leader was reaped:
// root's signal would then reach whatever process group took the number
// since, another account's or root's own (TestHostileGroupReused).
func (p *process) signalGroup(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd.Process != nil && !p.reaped {
		proc.SignalGroup(p.cmd.Process.Pid, sig)
	}
}

func (p *process) resize(rows, cols uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// After close the descriptor number may belong to another file, so a
	// late resize must not reach it.
	if p.tty != nil && !p.ttyClosed && rows > 0 && cols > 0 {
		setsize(p.tty, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
	}
}

// kill ends the command's process group: SIGHUP, then SIGKILL after
// killDelay (sent by wait, at the latest, before it reaps the leader).
func (p *process) kill() {
	p.mu.Lock()
	if p.killAt.IsZero() {
		p.killAt = time.Now().Add(killDelay)
	}
	p.mu.Unlock()
	p.signalGroup(syscall.SIGHUP)
	time.AfterFunc(killDelay, func() { p.signalGroup(syscall.SIGKILL) })
}

// wait waits for the command to exit and reaps it. Until the leader is
// reaped its pid is held (a zombie's), so no other process group can
// take the number: where the platform can wait without reaping
// (waitExited), a kill under way first waits out its delay while other
// processes of the group live, and sends its SIGKILL; then the group is
// marked reaped and no signal goes to it again.
func (p *process) wait() error {
	pid := p.cmd.Process.Pid
	if waitExited(pid) {
		p.mu.Lock()
		at := p.killAt
		p.mu.Unlock()
		if !at.IsZero() {
			for time.Now().Before(at) && groupHasLive(pid) {
				time.Sleep(20 * time.Millisecond)
			}
			p.signalGroup(syscall.SIGKILL)
		}
	}
	p.mu.Lock()
	p.reaped = true
	p.mu.Unlock()
	return p.cmd.Wait()
}

func (p *process) close() {
	if p.tty != nil {
		p.mu.Lock()
		p.ttyClosed = true
		p.tty.Close()
		p.mu.Unlock()
	} else {
		p.closeStdin()
		for _, o := range p.outputs {
			o.r.Close()
		}
	}
}

func (s *Server) startProcess(b *box, start *controlv1.Start) (*process, error) {
	dir := start.GetDir()
	switch {
	case dir == "":
		dir = b.workspace()
	case !filepath.IsAbs(dir):
		dir = filepath.Join(b.workspace(), dir)
	}
	name := filepath.Base(s.shell)
	cmd := &exec.Cmd{Path: s.shell, Dir: dir, Env: s.environ(b, start), SysProcAttr: s.sysProcAttr(b)}
	if start.GetCommand() == "" {
		cmd.Args = []string{"-" + name}
	} else {
		cmd.Args = []string{name, "-c", start.GetCommand()}
	}
	p := &process{cmd: cmd}
	if t := start.GetTty(); t != nil {
		s.installTerminfo(b, t)
		// 0×0 stays 0×0, as sshd leaves it (ssh -tt from no terminal asks
		// for it); programs then take their own defaults.
		ws := &pty.Winsize{Rows: uint16(t.GetRows()), Cols: uint16(t.GetCols())}
		f, err := startPTY(cmd, ws, t.GetModes())
		if err != nil {
			return nil, startError(b, start, s.shell, err)
		}
		p.tty, p.stdin = f, f
		p.outputs = []output{{r: f}}
		return p, nil
	}
	proc.NewSession(cmd)
	// Pipes of our own rather than exec's: the child gets the files
	// themselves (no copying goroutine), Wait leaves our ends alone, and
	// the pipes can be grown.
	child, ours, err := stdioPipes(3)
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = child[0], child[1], child[2]
	err = cmd.Start()
	closeAll(child[:])
	if err != nil {
		closeAll(ours[:])
		return nil, startError(b, start, s.shell, err)
	}
	// Read and written with raw system calls: each request of a relayed
	// stream (sftp's) then wakes no sysmon (internal/rawio).
	p.stdin = rawio.File(ours[0])
	p.outputs = []output{{r: rawio.File(ours[1])}, {r: rawio.File(ours[2]), stderr: true}}
	return p, nil
}

// startError is the status of a command of box b that did not start. The
// shell is known to exist, so a missing or closed file is the working
// directory, which the child enters as the box user: the server never
// looks at that path as root.
func startError(b *box, start *controlv1.Start, shell string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR):
		return status.Errorf(codes.InvalidArgument, "working directory %s does not exist in box %s", start.GetDir(), b.Name)
	case errors.Is(err, syscall.EACCES):
		return status.Errorf(codes.InvalidArgument, "working directory %s is closed to the user of box %s", start.GetDir(), b.Name)
	}
	return status.Errorf(codes.Internal, "start %s: %v", shell, err)
}

// environ is the command's whole environment: a fresh login environment
// for the box user plus what the client asked for; nothing else of the
// server's.
func (s *Server) environ(b *box, start *controlv1.Start) []string {
	u := "user"
	if n := s.userName(b); n != "" {
		u = n
	} else if cu, err := user.Current(); err == nil {
		u = cu.Username
	}
	env := map[string]string{
		"HOME":              b.home(),
		"USER":              u,
		"LOGNAME":           u,
		"SHELL":             s.shell,
		"PATH":              s.path,
		"COCOONBOX_BOX":     b.Name,
		"COCOONBOX_WORKDIR": b.workspace(),
		// The box's /run: the offload inbox's socket and the secrets
		// (docs/cocoonbox-agent.md), and tmux's server socket, so each box
		// has its own tmux.
		"COCOONBOX_RUN_DIR": b.run(),
		"TMUX_TMPDIR":       b.run(),
	}
	if lang := os.Getenv("LANG"); lang != "" {
		env["LANG"] = lang
	}
	for _, k := range trustVars {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	if t := start.GetTty(); t != nil && t.GetTerm() != "" {
		env["TERM"] = t.GetTerm()
	}
	for k, v := range start.GetEnv() {
		if k != "" && !strings.ContainsAny(k, "=\x00") && !strings.Contains(v, "\x00") {
			env[k] = v
		}
	}
	// Set last, so that no client's env replaces it: how stop and the next
	// start find a box command that left its process group (setsid).
	env[markerVar] = s.Dir
	env[boxMarkerVar] = b.ID
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// trustVars are the TLS trust settings of the machine, as the local box
// was started with them (never the client's), that its commands get as
// they get its PATH and LANG: behind a proxy that re-signs TLS, npm, curl,
// git and Python in the box then trust what the machine's own tools do
// (install-cli's npm among them).
var trustVars = []string{"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE"}

var termRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$`) })

// maxTerminfo is the largest compiled terminfo entry installTerminfo
// keeps, in bytes; ncurses' own entries are under 4 KiB, extended ones
// under 32 KiB.
const maxTerminfo = 64 << 10

// terminfoScript is installTerminfo's, run as the box user: $1 is the
// entry's name, the rest the subdirectories of ~/.terminfo to put it in
// where none is; the entry is stdin.
const terminfoScript = `umask 022
t=$1
shift
src=
for sub; do
	f=$HOME/.terminfo/$sub/$t
	[ -e "$f" ] && continue
	mkdir -p "$HOME/.terminfo/$sub" || exit
	if [ -n "$src" ]; then cp "$src" "$f"; else cat >"$f" && src=$f; fi || exit
done
`

// installTerminfo puts the client's compiled terminfo entry in the box
// user's ~/.terminfo, where ncurses looks first, unless one is there; as
// the box user (asUser), since the home is its.
func (s *Server) installTerminfo(b *box, t *controlv1.Tty) {
	term, data := t.GetTerm(), t.GetTerminfo()
	if len(data) == 0 || len(data) > maxTerminfo || !termRE().MatchString(term) {
		return
	}
	// ncurses names the subdirectory by the first letter, or by its hex
	// code on case-insensitive file systems.
	if err := s.asUser(b, data, terminfoScript, term, term[:1], strconv.FormatInt(int64(term[0]), 16)); err != nil {
		s.logf("box %s: terminfo entry %s: %v", b.Name, term, err)
	}
}

// loginShell is the current user's shell from /etc/passwd, else $SHELL,
// else /bin/sh.
func loginShell() string {
	if f, err := os.Open("/etc/passwd"); err == nil {
		defer f.Close()
		uid := strconv.Itoa(os.Getuid())
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Split(sc.Text(), ":")
			if len(fs) >= 7 && fs[2] == uid && fs[6] != "" {
				if _, err := os.Stat(fs[6]); err == nil {
					return fs[6]
				}
			}
		}
	}
	if sh := os.Getenv("SHELL"); sh != "" {
		return sh
	}
	return "/bin/sh"
}

// stdioPipes makes the first n of a command's stdin, stdout and stderr
// pipes: child holds the ends the command gets (stdin's read end, the
// others' write ends), ours the other ends. Each is grown to pipeSize (a
// 1 MiB pipe moves bulk data in fewer, larger reads and messages than the
// default 64 KiB; failure only costs speed). On an error none is left
// open; the error is gRPC's Internal.
func stdioPipes(n int) (child, ours [3]*os.File, err error) {
	for i := range n {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(child[:i])
			closeAll(ours[:i])
			return child, ours, status.Errorf(codes.Internal, "pipe: %v", err)
		}
		if i == 0 {
			child[i], ours[i] = r, w
		} else {
			child[i], ours[i] = w, r
		}
		proc.GrowPipe(r, pipeSize)
	}
	return child, ours, nil
}
