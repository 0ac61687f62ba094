package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
)

// ExitFailure is ssh's status for any failure of its own (ssh(1) EXIT
// STATUS), and ours for a remote command killed by a signal, as ssh's.
const ExitFailure = 255

// Env is what Run needs from its process.
type Env struct {
	// Prog prefixes our messages, such as "cocoonbox-ssh".
	Prog string
	// Version is the line -V prints on stderr.
	Version string
	// Stdin, Stdout and Stderr are the process's streams. A terminal is
	// recognised by an Fd method, as *os.File has.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Environ is the local environment: for -o SendEnv, and TERM and the
	// terminfo search path in terminal mode.
	Environ []string
	// Dial makes the client; it is called once, after the command line is
	// known to be good, and never for -G or -V.
	Dial func() (*box.Client, error)
	// Argv is this run's own command line, the program's path first, which
	// -f runs again in the background (background.go); -f fails in one
	// line when it is empty.
	Argv []string
}

// Run runs the command o describes and returns the exit status ssh would:
// the remote command's, or 255 for a failure of ours with one line on
// stderr. -V and -G are answered without a connection; a terminal session
// gives back the terminal's exact termios however it ends.
func Run(o *Options, env Env) int {
	if o.Version {
		fmt.Fprintln(env.Stderr, env.Version)
		return 0
	}
	if o.DumpConfig {
		if o.WriteConfig(env.Stdout) != nil {
			return ExitFailure
		}
		return 0
	}
	r := &runner{o: o, env: env, log: env.Stderr}
	if o.LogFile != "" {
		f, err := os.OpenFile(o.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return r.fail(fmt.Errorf("open log file: %w", err))
		}
		defer f.Close()
		r.log = f
	}
	if o.ForkAfterAuthentication && !r.inBackground() {
		return r.fork()
	}
	return r.run()
}

// runner is one run of the shim.
type runner struct {
	o   *Options
	env Env
	// log receives our own messages: stderr, or the -E file.
	log io.Writer
	// raw is set while the local terminal is in raw mode, when our lines
	// need "\r\n".
	raw bool
	// ready, when not nil, tells the foreground process of -f that this
	// one is ready (background.go); it is safe to call more than once.
	ready func()
}

// markReady is where ssh -f would go to the background: the forwards
// listen, and the command has started (or, with -N, the box is up).
func (r *runner) markReady() {
	if r.ready != nil {
		r.ready()
	}
}

func (r *runner) run() int {
	o := r.o
	line := o.Line()
	hasCommand := line != ""
	if o.Session == SessionSubsystem {
		l, err := subsystemLine(line, r.env.Prog, sftpServers)
		if err != nil {
			return r.fail(err)
		}
		line = l
	}
	fd := TerminalFd(r.env.Stdin)
	tty := r.wantTTY(fd >= 0, hasCommand)

	c, err := r.env.Dial()
	if err != nil {
		return r.fail(err)
	}
	defer c.Close()
	r.debugf(LogDebug1, "Connecting to box %s at %s", o.Box(), c.Endpoint().URL)
	if err := r.mosh(c.Endpoint(), line); err != nil {
		return r.fail(err)
	}
	if o.StdioHost != "" {
		return r.stdioForward(c)
	}
	fw, err := r.startForwards(c)
	if err != nil {
		return r.fail(err)
	}
	if o.Session == SessionNone {
		code := r.none(c, fw.lost)
		fw.stop()
		return code
	}
	// As ssh, the run ends when the session has and no forwarded
	// connection is left open.
	defer fw.wait()
	env := r.remoteEnv()
	if sock := o.AgentSocket(r.getenv); sock != "" {
		if path := fw.startAgent(sock); path != "" {
			env["SSH_AUTH_SOCK"] = path
		}
	}
	cmd := &box.Command{
		Box:      o.Box(),
		Line:     line,
		Env:      env,
		Stdin:    r.env.Stdin,
		Stdout:   r.env.Stdout,
		Stderr:   r.env.Stderr,
		Progress: r.progress(),
	}
	if o.StdinNull {
		cmd.Stdin = nil
	}
	cmd.Started = r.markReady
	if line == "" {
		r.debugf(LogDebug1, "Requesting a login shell")
	} else {
		r.debugf(LogDebug1, "Sending command: %s", line)
	}
	if tty {
		return r.terminal(c, cmd, fd)
	}
	return r.plain(c, cmd)
}

// wantTTY decides on a remote terminal as ssh.c does: asked for with -t,
// or by default for a login shell; never with -T or -N; and only when stdin
// is a terminal, unless forced with -tt.
func (r *runner) wantTTY(stdinIsTerminal, hasCommand bool) bool {
	o := r.o
	tty := o.TTY == TTYWanted || o.TTY == TTYForced
	if !hasCommand {
		tty = o.TTY != TTYNever
	}
	if o.TTY == TTYNever || o.Session == SessionNone {
		tty = false
	}
	if (!stdinIsTerminal || o.StdinNull) && o.TTY != TTYForced {
		if tty {
			r.logf(LogInfo, "Pseudo-terminal will not be allocated because stdin is not a terminal.")
		}
		tty = false
	}
	return tty
}

// plain runs a command without a terminal: signals are forwarded.
func (r *runner) plain(c *box.Client, cmd *box.Command) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan string, 1)
	cmd.Signals = signals
	var started atomic.Bool
	then := cmd.Started
	cmd.Started = func() {
		started.Store(true)
		if then != nil {
			then()
		}
	}
	done := make(chan int, 1)
	// Registered before the call starts, so that a signal while connecting
	// is ours to answer (255), not a death by the signal.
	ch := make(chan os.Signal, 2)
	notifyUnignored(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	go forwardSignals(ctx, ch, signals, done, started.Load)

	type result struct {
		st  box.ExitStatus
		err error
	}
	res := make(chan result, 1)
	go func() {
		st, err := c.Exec(ctx, cmd)
		res <- result{st, err}
	}()
	select {
	case x := <-res:
		return r.status(x.st, x.err)
	case code := <-done:
		r.debugf(LogDebug1, "Killed by a signal.")
		// The call's own end ends the command in the box: a resumable
		// one's client tells the box (for a few seconds at most when the
		// connection is lost), where an exit now would leave the command
		// there for the resume window. Bounded: a write to a stdout that
		// takes nothing (a terminal after ^S) does not see the cancel.
		cancel()
		select {
		case <-res:
		case <-time.After(5 * time.Second):
		}
		return code
	}
}

// status turns how a command ended into ssh's exit status.
func (r *runner) status(st box.ExitStatus, err error) int {
	if err != nil {
		if we, ok := errors.AsType[*box.WriteError](err); ok {
			if brokenPipe(we) {
				// Our reader has gone: ssh exits 255 without a word.
				return ExitFailure
			}
			// Any other failure to write (ENOSPC, EIO) is ours to report.
			return r.fail(we)
		}
		return r.fail(err)
	}
	if st.Error != "" {
		return r.fail(fmt.Errorf("box %s: %s", r.o.Box(), st.Error))
	}
	if st.Signal != "" {
		// OpenSSH says nothing here either; see docs/cocoonbox-ssh.md.
		r.debugf(LogDebug1, "Remote command killed by signal %s.", st.Signal)
		return ExitFailure
	}
	r.debugf(LogDebug1, "Exit status %d", st.Code)
	return st.Code
}

// progress is where the lines of a box's wake go: r.log, unless -q.
func (r *runner) progress() io.Writer {
	if r.o.LogLevel < LogInfo {
		return nil
	}
	return r.log
}

// none is -N: no command. As ssh, it connects (waking the box) and waits
// for a signal; SIGTERM ends it with 0, others with 255, as does a
// value on lost (a listener of -R or -A in the box ended by itself).
func (r *runner) none(c *box.Client, lost <-chan struct{}) int {
	ch := make(chan os.Signal, 1)
	notifyUnignored(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(ch)
	if _, err := c.Ensure(context.Background(), r.o.Box(), r.progress()); err != nil {
		return r.fail(err)
	}
	r.debugf(LogDebug1, "Box %s is running; waiting for a signal (-N)", r.o.Box())
	r.markReady()
	select {
	case s := <-ch:
		if s != syscall.SIGTERM {
			return ExitFailure
		}
		return 0
	case <-lost:
		// A listener in the box ended (listenerLost said why).
		return ExitFailure
	}
}

// forwardSignals forwards the first INT, TERM or HUP from ch (registered
// by the caller) to the remote command and ends the call with 255 on a
// second one, on QUIT, or on any of them
// before the command has started (ssh exits then too, and the command must
// not start after we were told to stop). A signal this process inherited
// as ignored (nohup) stays ignored.
func forwardSignals(ctx context.Context, ch chan os.Signal, to chan<- string, done chan<- int, started func() bool) {
	defer signal.Stop(ch)
	sent := false
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-ch:
			if sent || s == syscall.SIGQUIT || !started() {
				done <- ExitFailure
				return
			}
			sent = true
			select {
			case to <- signalName(s.(syscall.Signal)):
			default:
			}
		}
	}
}

// notifyUnignored is signal.Notify for those of sigs not ignored when the
// process started: Notify would undo nohup's and the shell's ignores.
func notifyUnignored(ch chan<- os.Signal, sigs ...os.Signal) {
	for _, s := range sigs {
		if !signal.Ignored(s) {
			signal.Notify(ch, s)
		}
	}
}

// signalName is a signal's name without SIG, as RFC 4254 section 6.9 names it.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGQUIT:
		return "QUIT"
	}
	return ""
}

// remoteEnv is what -o SendEnv and -o SetEnv send, as the box's AcceptEnv
// lets it in, with SSH_CONNECTION and SSH_CLIENT (SessionEnv); nothing
// else of the local environment reaches the box.
func (r *runner) remoteEnv() map[string]string {
	env := map[string]string{}
	for _, pat := range r.o.SendEnv {
		for _, kv := range r.env.Environ {
			k, val, _ := strings.Cut(kv, "=")
			if ok, _ := path.Match(pat, k); ok {
				env[k] = val
			}
		}
	}
	for _, kv := range r.o.SetEnv {
		k, val, _ := strings.Cut(kv, "=")
		env[k] = val
	}
	for k := range env {
		r.debugf(LogDebug1, "Sending env %s", k)
	}
	return SessionEnv(env)
}

func (r *runner) getenv(name string) string {
	for i := len(r.env.Environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(r.env.Environ[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// eol ends our lines: "\r\n" while the terminal is raw.
func (r *runner) eol() string {
	if r.raw {
		return "\r\n"
	}
	return "\n"
}

// logf prints one of ssh's own diagnostics at level, with ssh's "\r\n".
func (r *runner) logf(level LogLevel, format string, args ...any) {
	if r.o.LogLevel >= level {
		fmt.Fprintf(r.log, format+"\r\n", args...)
	}
}

// debugf prints a -v line, "debugN: ..." as ssh does.
func (r *runner) debugf(level LogLevel, format string, args ...any) {
	if r.o.LogLevel >= level {
		fmt.Fprintf(r.log, "debug%d: %s\r\n", level-LogVerbose, fmt.Sprintf(format, args...))
	}
}

func (r *runner) fail(err error) int {
	// -q (LogLevel QUIET) silences even fatal errors, as ssh's does.
	if r.o == nil || r.o.LogLevel > LogQuiet {
		fmt.Fprintf(r.log, "%s: %v%s", r.env.Prog, err, r.eol())
	}
	return ExitFailure
}

// sftpServers are where Linux distributions install OpenSSH's sftp-server.
var sftpServers = []string{
	"/usr/lib/openssh/sftp-server",
	"/usr/libexec/openssh/sftp-server",
	"/usr/lib/ssh/sftp-server",
	"/usr/libexec/sftp-server",
	"/usr/lib/sftp-server",
}

// subsystemLine is the command that starts subsystem name (-s) in the box.
// Only sftp exists: the box's sftp-server, looked for where distributions
// put it and then on the PATH, run through sh whatever the user's shell.
func subsystemLine(name, prog string, servers []string) (string, error) {
	if name != "sftp" {
		return "", fmt.Errorf("subsystem %q is not available: a box has only sftp", printable(name))
	}
	script := "for p in " + strings.Join(servers, " ") + `; do [ -x "$p" ] && exec "$p"; done; ` +
		`command -v sftp-server >/dev/null 2>&1 && exec sftp-server; ` +
		`echo "` + prog + `: subsystem sftp: the box has no sftp-server; install openssh-sftp-server in it" >&2; exit 255`
	return "exec /bin/sh -c '" + script + "'", nil
}
