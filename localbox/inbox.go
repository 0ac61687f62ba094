package localbox

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// A box's offload inbox (`cocoonbox-agent offload serve`) runs while the
// box is awake, as the inbox unit does in a real box: started when the
// server serves or wakes the box, stopped when the box sleeps or the
// server stops. Its socket is in the box's run directory.

// inboxes holds the running inbox of each box, by box id (names repeat
// across accounts).
type inboxes struct {
	mu   sync.Mutex
	cmds map[string]*inboxProc
	// failed is when each box's inbox last exited at its start:
	// ensureInbox does not try again within inboxRetry.
	failed map[string]time.Time
	// closed is set once the server powers off: no inbox starts after it,
	// so none can outlive it (a start racing Stop, as Serve's own or an
	// Ensure's, found the boxes already stopped).
	closed bool
}

type inboxProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// run is the box's run directory (RunDir): it stands for /run
// (COCOONBOX_RUN_DIR) and holds the inbox socket and tmux's (TMUX_TMPDIR).
func (b *box) run() string { return RunDir(b.dir) }

// agentPath is cocoonbox-agent beside the server's binaries, else on its
// PATH, else "".
func (s *Server) agentPath() string {
	if s.BinDir != "" {
		p := filepath.Join(s.BinDir, "cocoonbox-agent")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	p, err := exec.LookPath("cocoonbox-agent")
	if err != nil {
		return ""
	}
	return p
}

// inboxLog is where box b's inbox's output is logged: in the box's own
// directory, which is root's, beside box.json, out of the box user's reach.
func (b *box) inboxLog() string { return filepath.Join(b.dir, "inbox.log") }

// maxInboxLog is the most an inbox's log keeps in inbox.log, in bytes;
// as much again of what came before is in inbox.log.1.
const maxInboxLog = 1 << 20

// maxLogLine is the longest line of an inbox's output the log keeps, in
// bytes; the rest of a longer one is dropped.
const maxLogLine = 4096

// copyLog writes each line r gives to l escaped (printable.Line), so the
// box user, who writes r, cannot forge the log's lines or put a terminal
// sequence in it, and closes l at the end. seen, if not nil, is given
// each line as it came.
func copyLog(l *inboxLog, r io.Reader, seen func(line []byte)) {
	defer l.close()
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if seen != nil {
				seen(line)
			}
			l.write(printable.Line(strings.TrimSuffix(string(line), "\n"), 0) + "\n")
		}
		for err == bufio.ErrBufferFull {
			_, err = br.ReadSlice('\n')
		}
		if err != nil {
			return
		}
	}
}

// inboxLog is an inbox's log file, bounded: the box user can write as
// much of the inbox's output as it likes (its stdout is a process of the
// box user's), and it goes to root's disk. Past maxInboxLog bytes the
// file becomes inbox.log.1 (replacing the one before) and a new one is
// begun, so the two never hold more than about twice that.
type inboxLog struct {
	path string
	f    *os.File
	size int64
}

// openInboxLog opens path (in the box's root-owned directory) to append
// to, never through a link.
func openInboxLog(path string) (*inboxLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|safefile.NoFollow, 0o600)
	if err != nil {
		return nil, err
	}
	l := &inboxLog{path: path, f: f}
	if fi, err := f.Stat(); err == nil {
		l.size = fi.Size()
	}
	return l, nil
}

func (l *inboxLog) write(line string) {
	if l.f == nil {
		return
	}
	if l.size+int64(len(line)) > maxInboxLog {
		l.f.Close()
		l.f = nil
		if err := os.Rename(l.path, l.path+".1"); err != nil {
			return
		}
		f, err := os.OpenFile(l.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND|safefile.NoFollow, 0o600)
		if err != nil {
			return
		}
		l.f, l.size = f, 0
	}
	n, _ := io.WriteString(l.f, line)
	l.size += int64(n)
}

func (l *inboxLog) close() {
	if l.f != nil {
		l.f.Close()
	}
}

// startInbox starts b's inbox unless one runs, and waits (briefly) for its
// socket. A server without cocoonbox-agent runs none. The inbox itself
// makes its socket's directory and replaces a stale socket (as the box
// user), and refuses to start when another inbox answers there: one left
// by a local box killed before sweep could end it.
func (s *Server) startInbox(b *box) {
	agent := s.agentPath()
	if agent == "" {
		return
	}
	if c, ok := s.eng.(*containerEngine); ok {
		c.startInbox(b)
		return
	}
	s.inbox.mu.Lock()
	defer s.inbox.mu.Unlock()
	if s.inbox.closed {
		return
	}
	if s.inbox.cmds == nil {
		s.inbox.cmds = map[string]*inboxProc{}
	}
	if s.inbox.cmds[b.ID] != nil {
		return
	}
	if err := s.chownBox(b); err != nil {
		s.logf("box %s: inbox: %v", b.Name, err)
		return
	}
	logf, err := openInboxLog(b.inboxLog())
	if err != nil {
		s.logf("box %s: inbox: %v", b.Name, err)
		return
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.close()
		s.logf("box %s: inbox: %v", b.Name, err)
		return
	}
	cmd := &exec.Cmd{
		Path:        agent,
		Args:        []string{"cocoonbox-agent", "offload", "serve"},
		Dir:         b.home(),
		Env:         s.environ(b, &controlv1.Start{}),
		Stdout:      pw,
		Stderr:      pw,
		SysProcAttr: s.sysProcAttr(b),
	}
	proc.NewSession(cmd)
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		logf.close()
		s.logf("box %s: inbox: %v", b.Name, err)
		return
	}
	logged := make(chan struct{})
	go func() {
		copyLog(logf, pr, nil)
		pr.Close()
		close(logged)
	}()
	p := &inboxProc{cmd: cmd, exited: make(chan struct{})}
	s.inbox.cmds[b.ID] = p
	exited := p.exited
	s.recordProc(b, cmd.Process.Pid)
	go func() {
		cmd.Wait()
		s.forgetProc(cmd.Process.Pid)
		// A process the inbox started may hold the pipe after it exits.
		select {
		case <-logged:
		case <-time.After(time.Second):
			pr.Close()
		}
		close(exited)
		s.inbox.mu.Lock()
		if s.inbox.cmds[b.ID] == p {
			delete(s.inbox.cmds, b.ID)
		}
		s.inbox.mu.Unlock()
	}()
	// The socket is looked for through an os.Root of the run directory
	// (the box user's): a link there cannot take the look outside it.
	run, err := os.OpenRoot(b.run())
	if err != nil {
		s.logf("box %s: inbox: %v", b.Name, err)
		return
	}
	defer run.Close()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := run.Lstat(filepath.Join("cocoonbox", "offload.sock")); err == nil {
			break
		}
		select {
		case <-exited:
			s.logf("box %s: the inbox exited at start; see %s", b.Name, b.inboxLog())
			// startInbox holds s.inbox.mu.
			if s.inbox.failed == nil {
				s.inbox.failed = map[string]time.Time{}
			}
			s.inbox.failed[b.ID] = time.Now()
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.logf("box %s: inbox started (pid %d)", b.Name, cmd.Process.Pid)
}

// inboxRetry is how long after an inbox exited at its start ensureInbox
// leaves it be, so that one that cannot start (its run directory made
// unusable from inside the box) is not started again for every command.
const inboxRetry = 10 * time.Second

// ensureInbox starts b's inbox when none runs (startInbox), once the
// server serves: an inbox that exited, killed or crashed, is started
// again by the box's next command. It costs one map look-up when the
// inbox runs.
func (s *Server) ensureInbox(b *box) {
	if !s.serving.Load() {
		return
	}
	s.inbox.mu.Lock()
	skip := s.inbox.closed || s.inbox.cmds[b.ID] != nil || time.Since(s.inbox.failed[b.ID]) < inboxRetry
	s.inbox.mu.Unlock()
	if !skip {
		s.startInbox(b)
	}
}

// stopInbox stops b's inbox: SIGTERM, SIGKILL after 5 s.
func (s *Server) stopInbox(b *box) {
	if c, ok := s.eng.(*containerEngine); ok {
		c.forgetInbox(b)
	}
	s.inbox.mu.Lock()
	p := s.inbox.cmds[b.ID]
	delete(s.inbox.cmds, b.ID)
	s.inbox.mu.Unlock()
	if p == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
	s.logf("box %s: inbox stopped", b.Name)
}

// powerOff stops every inbox and ends the boxes' tmux servers, with the
// box CLI sessions in them, and what is left of the box commands, then
// removes the boxes' run directories: the server is going away.
func (s *Server) powerOff() {
	s.inbox.mu.Lock()
	s.inbox.closed = true
	s.inbox.mu.Unlock()
	s.eachBox(s.stopInbox)
	s.eachBox(s.killTmux)
	if n := s.sweep(killDelay); n > 0 {
		s.logf("ended %d process groups left by box commands", n)
	}
	if n := s.endMarked(killDelay); n > 0 {
		s.logf("ended %d box processes that had left their process group", n)
	}
	// The boxes' /run goes with them, as a machine's tmpfs does.
	s.eachBox(s.removeRun)
}

// eachBox runs f on every box at once and waits for all: a box user
// answers tmux on its own socket and may hold its inbox past SIGTERM, so
// a box's killTmux or stopInbox may take its whole 5 s, and one box after
// another an account with three boxes held a start past `localbox
// start`'s 15 s and a stop past `localbox stop`'s 10 s.
func (s *Server) eachBox(f func(*box)) {
	var wg sync.WaitGroup
	for _, b := range s.reg.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(b)
		}()
	}
	wg.Wait()
}

// killTmux ends box b's tmux server, if the run directory holds a tmux
// socket directory. The directory is listed through an os.Root of it, and
// tmux runs as the box user.
func (s *Server) killTmux(b *box) {
	run, err := os.OpenRoot(b.run())
	if err != nil {
		return
	}
	d, err := run.Open(".")
	run.Close()
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "tmux-") }) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", "kill-server")
	cmd.Env = s.environ(b, &controlv1.Start{})
	cmd.SysProcAttr = s.sysProcAttr(b)
	cmd.Run()
}

// cleanUp ends what a local box that died without stopping (kill -9, a
// crash) left behind on this state: its box commands and inboxes, by the
// records in DIR/procs, and the boxes' tmux servers.
func (s *Server) cleanUp() {
	if n := s.sweep(0); n > 0 {
		s.logf("ended %d process groups a previous local box left behind", n)
	}
	s.eachBox(s.killTmux)
	if n := s.endMarked(0); n > 0 {
		s.logf("ended %d box processes a previous local box left outside their process groups", n)
	}
}
