package sshserve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/shim"
)

// The values of SSH_CONNECTION and SSH_CLIENT in the box, as sshd -i
// sets them: its peer is the stdio of a ProxyCommand, no socket, so each
// address is UNKNOWN and each port 65535. mosh's server command keeps
// shim.SSHConnection, whose server address mosh-server -s binds to
// (shim.MoshUDP); under sshd -i it would find no address to bind.
const (
	stdioConnection = "UNKNOWN 65535 UNKNOWN 65535"
	stdioClient     = "UNKNOWN 65535 65535"
)

// exitFailure is ssh's exit status for a failure of its own, ours for a
// command we could not run.
const exitFailure = 255

// The payloads of the session requests we read (RFC 4254 section 6).
type (
	ptyReq struct {
		Term                 string
		Cols, Rows, PxW, PxH uint32
		Modes                string
	}
	windowChange struct{ Cols, Rows, PxW, PxH uint32 }
	envReq       struct{ Name, Value string }
	execReq      struct{ Command string }
	signalReq    struct{ Name string }
	exitStatus   struct{ Status uint32 }
	exitSignal   struct {
		Signal     string
		CoreDumped bool
		Message    string
		Lang       string
	}
)

// session is one session channel: its requests up to shell, exec or
// subsystem describe one box command, which runs to its end; then the
// channel gets the exit status, EOF and close, in that order.
type session struct {
	s  *Server
	c  *connState
	ch ssh.Channel

	env     map[string]string
	tty     *box.TTY
	resizes chan box.Size
	signals chan string
	// eow is closed on the client's eow@openssh.com.
	eow     chan struct{}
	eowSeen bool
	// started is set once a command was asked for; later env, pty-req,
	// auth-agent-req and further commands are refused.
	started bool
	// sftp is set when the command is the sftp subsystem: its requests
	// go through an sftpGate.
	sftp bool
}

// session serves one session channel until its command ends or the
// client closes it.
func (c *connState) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	s := c.s
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	ss := &session{s: s, c: c, ch: ch, resizes: make(chan box.Size, 1), signals: make(chan string, 4), eow: make(chan struct{})}
	var wg sync.WaitGroup
	ran := make(chan struct{})
	// The requests channel closes when the client closes the channel (or
	// the connection goes): then a command still running is cancelled.
	for r := range reqs {
		s.logf("session request %s", r.Type)
		ok := false
		switch r.Type {
		case "env":
			var m envReq
			// A name the box does not accept gets a failure, as from sshd.
			if ok = !ss.started && ssh.Unmarshal(r.Payload, &m) == nil && shim.AcceptsEnv(m.Name); ok {
				if ss.env == nil {
					ss.env = map[string]string{}
				}
				ss.env[m.Name] = m.Value
			}
		case "pty-req":
			var m ptyReq
			if ok = !ss.started && ssh.Unmarshal(r.Payload, &m) == nil; ok {
				ss.tty = &box.TTY{Term: m.Term, Rows: m.Rows, Cols: m.Cols, Modes: []byte(m.Modes)}
				if s.Terminfo != nil {
					ss.tty.Terminfo = s.Terminfo(m.Term)
				}
			}
		case "window-change":
			var m windowChange
			if ok = ssh.Unmarshal(r.Payload, &m) == nil; ok {
				// Only the latest size matters: replace one not yet sent.
				select {
				case <-ss.resizes:
				default:
				}
				ss.resizes <- box.Size{Rows: m.Rows, Cols: m.Cols}
			}
		case "signal":
			var m signalReq
			if ok = ssh.Unmarshal(r.Payload, &m) == nil; ok {
				select {
				case ss.signals <- m.Name:
				default:
				}
			}
		case "auth-agent-req@openssh.com":
			// OpenSSH's ssh -A asks without wanting a reply: a failure
			// is told on Log, and the command runs without SSH_AUTH_SOCK.
			if ok = !ss.started; ok {
				if err := c.agentForward(); err != nil {
					s.warnf("agent forwarding: %v", err)
					ok = false
				}
			}
		case "eow@openssh.com":
			// OpenSSH's client sends it when its stdout has closed (its
			// reader has gone) and drops the data that follows. sshd then
			// closes the command's stdout, which dies of SIGPIPE, and so
			// does ours; else `ssh box yes | head -1` never ends.
			if ok = !ss.eowSeen; ok {
				ss.eowSeen = true
				close(ss.eow)
			}
		case "shell", "exec", "subsystem":
			var line string
			line, ok = ss.commandLine(r)
			if ok {
				ss.started = true
				// The global requests sent before this one first (remote
				// forwards), as sshd answers them; then this reply, before
				// any output: the client expects the answer to its request
				// first.
				c.settled()
				r.Reply(true, nil)
				wg.Go(func() {
					defer close(ran)
					ss.run(ctx, line)
				})
				continue
			}
		}
		if r.WantReply {
			r.Reply(ok, nil)
		}
	}
	if ss.started && ss.tty != nil {
		// The channel's requests also end when the whole connection goes,
		// which ends ctx at once with ErrDetached (a terminal session
		// then stays in the box); a channel the client closed ends it.
		select {
		case <-ctx.Done():
		case <-ran:
		case <-time.After(time.Second):
		}
	}
	cancel()
	wg.Wait()
	ch.Close()
}

// commandLine is the box command line a shell, exec or subsystem request
// asks for; false refuses the request.
func (ss *session) commandLine(r *ssh.Request) (string, bool) {
	if ss.started {
		return "", false
	}
	switch r.Type {
	case "shell":
		return "", true
	case "exec":
		var m execReq
		if ssh.Unmarshal(r.Payload, &m) != nil {
			return "", false
		}
		return m.Command, true
	}
	var m execReq
	if ssh.Unmarshal(r.Payload, &m) != nil {
		return "", false
	}
	sub := ss.s.Subsystem
	if sub == nil {
		sub = func(name string) (string, error) { return shim.SubsystemLine(name, ss.s.prog()) }
	}
	line, err := sub(m.Command)
	if err != nil {
		ss.s.logf("subsystem %q: %v", m.Command, err)
		return "", false
	}
	ss.sftp = m.Command == "sftp"
	return line, true
}

// run runs line (empty: a login shell) in the box and ends the channel
// with how it ended.
func (ss *session) run(ctx context.Context, line string) {
	s := ss.s
	env := shim.SessionEnv(ss.env)
	if !shim.IsMoshServer(line) {
		env["SSH_CONNECTION"], env["SSH_CLIENT"] = stdioConnection, stdioClient
	}
	if sock := ss.c.agentSocket(); sock != "" {
		env["SSH_AUTH_SOCK"] = sock
	}
	cmd := &box.Command{
		Box:          s.Box,
		Line:         line,
		Env:          env,
		TTY:          ss.tty,
		Stdin:        ss.ch,
		Stdout:       ss.ch,
		Stderr:       ss.ch.Stderr(),
		Signals:      ss.signals,
		Resizes:      ss.resizes,
		StdoutClosed: ss.eow,
		Progress:     s.Progress,
	}
	if ss.tty != nil {
		// The client's terminal, raw: a resumable session's reconnecting
		// line shows there in place.
		cmd.StatusLine = ss.ch.Stderr()
	}
	if ss.sftp && ss.tty == nil {
		g := newSFTPGate(ss.ch, ss.ch, SFTPQueue)
		defer g.Close()
		cmd.Stdin, cmd.Stdout = g, g
	}
	var st box.ExitStatus
	err := s.check(line)
	if err == nil {
		st, err = s.Runner.Exec(ctx, cmd)
	}
	switch {
	case err != nil:
		if _, ok := errors.AsType[*box.WriteError](err); ok || ctx.Err() != nil {
			// The client has gone, or closed the channel: nothing to tell.
			s.logf("session: %v", err)
			break
		}
		ss.fail(err)
	case st.Error != "":
		ss.fail(fmt.Errorf("box %s: %s", s.Box, st.Error))
	case st.Signal != "":
		ss.ch.SendRequest("exit-signal", false, ssh.Marshal(exitSignal{Signal: st.Signal}))
	default:
		ss.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{Status: uint32(st.Code)}))
	}
	// exit-status before EOF and close, so that every client, however it
	// waits, sees the status (OpenSSH reports 255 for a channel closed
	// without one).
	ss.ch.CloseWrite()
	ss.ch.Close()
}

// fail tells the session's stderr what went wrong, as cocoonbox-ssh says
// it on its own, and ends the command with 255.
func (ss *session) fail(err error) {
	eol := "\n"
	if ss.tty != nil {
		eol = "\r\n"
	}
	fmt.Fprintf(ss.ch.Stderr(), "%s: %v%s", ss.s.prog(), err, eol)
	ss.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{Status: exitFailure}))
}

func (s *Server) check(line string) error {
	if s.Check == nil {
		return nil
	}
	return s.Check(line)
}

func (s *Server) prog() string {
	if s.Prog != "" {
		return s.Prog
	}
	return "cocoonbox-ssh"
}
