package localbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"
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
	// closed is set once the server powers off: no inbox starts after it,
	// so none can outlive it (a start racing Stop, as Serve's own or an
	// Ensure's, found the boxes already stopped).
	closed bool
}

type inboxProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// run is the box's run directory: it stands for /run (COCOONBOX_RUN_DIR)
// and holds the inbox socket and tmux's (TMUX_TMPDIR).
func (b *box) run() string { return filepath.Join(b.dir, "run") }

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

// linkAgent puts cocoonbox-agent on the box's login PATH: a link to
// agent at ~/.local/bin/cocoonbox-agent in the box home, as a box image
// installs it. A login shell (bash -l, which the box CLIs run for their
// hooks) resets PATH from /etc/profile and ~/.profile, which (Debian's
// /etc/skel one, which new box homes get) puts ~/.local/bin first when the
// directory exists; the server's own PATH does not reach it. A link of
// ours to another binary is replaced; a file that is no link is the
// user's, and stays.
func linkAgent(home, agent string) error {
	if a, err := filepath.Abs(agent); err == nil {
		agent = a
	}
	bin := filepath.Join(home, ".local", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	p := filepath.Join(bin, "cocoonbox-agent")
	if fi, err := os.Lstat(p); err == nil {
		if fi.Mode()&os.ModeSymlink == 0 {
			return nil
		}
		if t, _ := os.Readlink(p); t == agent {
			return nil
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return os.Symlink(agent, p)
}

// startInbox starts b's inbox unless one runs, and waits (briefly) for its
// socket. A server without cocoonbox-agent runs none.
func (s *Server) startInbox(b *box) {
	agent := s.agentPath()
	if agent == "" {
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
	if err := linkAgent(b.home(), agent); err != nil {
		s.logf("box %s: cocoonbox-agent on the login PATH: %v", b.Name, err)
	}
	if err := s.chownBox(b); err != nil {
		s.logf("box %s: inbox: %v", b.Name, err)
		return
	}
	if err := os.MkdirAll(filepath.Join(b.run(), "cocoonbox"), 0o700); err != nil {
		s.logf("box %s: inbox: %v", b.Name, err)
		return
	}
	// An inbox this server did not start (one left by a local box killed
	// before sweep could end it) keeps the socket: say so rather than start
	// one that exits at once. A socket nobody listens on is stale.
	sock := filepath.Join(b.run(), "cocoonbox", "offload.sock")
	if c, err := unixsock.Dial(sock); err == nil {
		c.Close()
		s.logf("box %s: an inbox this server did not start listens on %s; end it, then restart the local box", b.Name, sock)
		return
	}
	os.Remove(sock)
	logf, err := os.OpenFile(filepath.Join(b.run(), "inbox.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.logf("box %s: inbox: %v", b.Name, err)
		return
	}
	defer logf.Close()
	cmd := &exec.Cmd{
		Path:        agent,
		Args:        []string{"cocoonbox-agent", "offload", "serve"},
		Dir:         b.home(),
		Env:         s.environ(b, &controlv1.Start{}),
		Stdout:      logf,
		Stderr:      logf,
		SysProcAttr: s.sysProcAttr(b),
	}
	proc.NewSession(cmd)
	if err := cmd.Start(); err != nil {
		s.logf("box %s: inbox: %v", b.Name, err)
		return
	}
	p := &inboxProc{cmd: cmd, exited: make(chan struct{})}
	s.inbox.cmds[b.ID] = p
	exited := p.exited
	s.recordProc(cmd.Process.Pid)
	go func() {
		cmd.Wait()
		s.forgetProc(cmd.Process.Pid)
		close(exited)
		s.inbox.mu.Lock()
		if s.inbox.cmds[b.ID] == p {
			delete(s.inbox.cmds, b.ID)
		}
		s.inbox.mu.Unlock()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case <-exited:
			s.logf("box %s: the inbox exited at start; see %s", b.Name, filepath.Join(b.run(), "inbox.log"))
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.logf("box %s: inbox started (pid %d)", b.Name, cmd.Process.Pid)
}

// stopInbox stops b's inbox: SIGTERM, SIGKILL after 5 s.
func (s *Server) stopInbox(b *box) {
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
// box CLI sessions in them, and what is left of the box commands: the
// server is going away.
func (s *Server) powerOff() {
	s.inbox.mu.Lock()
	s.inbox.closed = true
	s.inbox.mu.Unlock()
	for _, b := range s.reg.all() {
		s.stopInbox(b)
		s.killTmux(b)
	}
	if n := s.sweep(killDelay); n > 0 {
		s.logf("ended %d process groups left by box commands", n)
	}
	if n := s.endMarked(killDelay); n > 0 {
		s.logf("ended %d box processes that had left their process group", n)
	}
}

// killTmux ends box b's tmux server, if its socket is there.
func (s *Server) killTmux(b *box) {
	socks, _ := filepath.Glob(filepath.Join(b.run(), "tmux-*", "*"))
	if len(socks) == 0 {
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
	for _, b := range s.reg.all() {
		s.killTmux(b)
	}
	if n := s.endMarked(0); n > 0 {
		s.logf("ended %d box processes a previous local box left outside their process groups", n)
	}
}
