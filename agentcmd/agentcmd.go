// Package agentcmd is cocoonbox-agent's command line: the offload verbs
// of agentwire's table, relay, listen, take, session and exec-serve, each
// wired to the package that does the work, and the one JSON line and exit
// status each offload verb ends with. It links none of the laptop's
// packages (cli, localbox, offload), so that a start of cocoonbox-agent,
// which every box CLI hook and every verb of back's and offload's Execs
// makes, initialises only what the box half needs.
package agentcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/boxagent"
	"github.com/cocoonbox/cocoonbox/boxexec"
	"github.com/cocoonbox/cocoonbox/boxsession"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/version"
	"github.com/cocoonbox/cocoonbox/relay"
)

// Exit statuses of the verbs that are not offload verbs (relay, listen,
// take, exec-serve); the offload verbs exit boxagent.Error's ExitCode,
// the same numbers for the same meanings.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// Env is what cocoonbox-agent reads of its environment.
type Env struct {
	// Getenv reads one variable.
	Getenv func(string) string
	// Environ is the whole environment, for the commands the box half
	// starts (tmux, the box CLI, git).
	Environ []string
	// GOOS is the platform it runs on; "" is runtime.GOOS.
	GOOS string
}

// Streams are the process's standard streams.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// Main is cocoonbox-agent, the box half of offload: args without the
// program name. Every offload verb prints exactly one JSON line on stdout
// ({"ok":true,...} or {"ok":false,"code","error"}) and exits 0, 1 failed,
// 2 usage, 3 refused or 4 inbox (docs/cocoonbox-agent.md).
func Main(args []string, env Env, s Streams) int {
	cfg := agentConfig(env, s)
	a := &agentRun{cfg: cfg, s: s, env: env}
	if err := platform(env.GOOS); err != nil {
		a.fail(err)
		return a.code
	}
	root := newAgentRoot(a)
	root.SetArgs(args)
	err := root.Execute()
	if a.printed {
		return a.code
	}
	if err == nil {
		return exitOK
	}
	// Errors cobra found before a verb ran: unknown verbs and flags.
	a.fail(&boxagent.Error{Code: agentwire.CodeUsage, Err: err})
	return a.code
}

// agentConfig maps the box's environment to the box half's paths:
// HOME, COCOONBOX_WORKDIR (default /workspace), COCOONBOX_RUN_DIR (default
// /run) and SHELL.
func agentConfig(env Env, s Streams) *boxagent.Config {
	get := func(k, def string) string {
		if v := env.Getenv(k); v != "" {
			return v
		}
		return def
	}
	self, err := os.Executable()
	if err != nil {
		self = "cocoonbox-agent"
	}
	return &boxagent.Config{
		AtStep:    KillAt(env.Getenv),
		Home:      get("HOME", "/home/user"),
		Workspace: get("COCOONBOX_WORKDIR", "/workspace"),
		RunDir:    get("COCOONBOX_RUN_DIR", "/run"),
		Shell:     get("SHELL", "/bin/sh"),
		Self:      self,
		Environ:   env.Environ,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(s.Err, "cocoonbox-agent: "+format+"\n", args...)
		},
	}
}

// agentRun carries one invocation's output state: exactly one line.
type agentRun struct {
	cfg     *boxagent.Config
	s       Streams
	env     Env
	printed bool
	code    int
}

// result prints v (a result struct with ok true) or err as the one line.
func (a *agentRun) result(v any, err error) error {
	if err != nil {
		return a.fail(err)
	}
	a.line(v)
	a.code = exitOK
	return nil
}

func (a *agentRun) fail(err error) error {
	e, ok := errors.AsType[*boxagent.Error](err)
	if !ok {
		e = &boxagent.Error{Code: agentwire.CodeFailed, Err: err}
	}
	msg := strings.ReplaceAll(e.Error(), "\n", "; ")
	a.line(agentwire.Failure{Code: e.Code, Error: msg, Findings: e.Findings, CLI: e.CLI})
	fmt.Fprintf(a.s.Err, "cocoonbox-agent: %s\n", msg)
	a.code = e.ExitCode()
	return nil
}

func (a *agentRun) line(v any) {
	if a.printed {
		return
	}
	a.printed = true
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"ok":false,"code":"failed","error":"encode the result"}`)
	}
	a.s.Out.Write(append(printable.JSON(b), '\n'))
}

// Root is cocoonbox-agent's command tree as Main runs it, with env and
// s: the man pages are made from it.
func Root(env Env, s Streams) *cobra.Command {
	return newAgentRoot(&agentRun{cfg: agentConfig(env, s), s: s, env: env})
}

func newAgentRoot(a *agentRun) *cobra.Command {
	root := &cobra.Command{
		Use:   "cocoonbox-agent",
		Short: "The box half of cocoonbox offload",
		Long: `cocoonbox-agent runs inside a box. "offload" verbs move a task's copy in
and out of the box and talk to its inbox; each prints one JSON line.
"relay" connects stdin and stdout to a TCP port (port forwarding);
"listen" and "take" are a listener in the box and its connections
(remote and agent forwarding).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Help only on -h or --help: anything else prints the one line.
		Args:    cobra.ArbitraryArgs,
		Version: version.String(),
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return a.fail(usage(fmt.Sprintf("unknown command %q; see: cocoonbox-agent --help", args[0])))
			}
			return a.fail(usage("give a command: offload, relay, listen or take; see: cocoonbox-agent --help"))
		},
	}
	root.SetVersionTemplate(versionTemplate)
	root.Flags().BoolP("version", "V", false, versionUsage)
	root.SetIn(a.s.In)
	root.SetOut(a.s.Out)
	root.SetErr(a.s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	var names []string
	for _, v := range agentwire.Verbs() {
		names = append(names, v.Name)
	}
	off := &cobra.Command{
		Use:   "offload",
		Short: "Offload verbs: " + strings.Join(names, ", "),
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return a.fail(usage(fmt.Sprintf("unknown verb %q; see: cocoonbox-agent offload --help", args[0])))
			}
			return a.fail(usage("give a verb: " + agentwire.OrList(names) + "; see: cocoonbox-agent offload --help"))
		},
	}
	root.AddCommand(off)
	off.AddCommand(agentVerbs(a)...)
	root.AddCommand(newAgentRelay(a), newAgentListen(a), newAgentTake(a), newAgentSession(a), newAgentExecServe(a))
	return root
}

// agentVerbs are the offload verbs' commands, one per verb of
// agentwire's table, each with what it runs.
func agentVerbs(a *agentRun) []*cobra.Command {
	cfg := a.cfg
	// post and env run in the box CLI's session, which names its repo.
	repoOrEnv := func(repo string) string {
		if repo == "" {
			return a.env.Getenv("COCOONBOX_OFFLOAD_REPO")
		}
		return repo
	}
	return []*cobra.Command{
		agentVerb(a, agentwire.Begin, func(r *agentwire.BeginRequest, _ []string) (any, error) {
			return cfg.Begin(*r)
		}),
		agentVerb(a, agentwire.Send, func(r *agentwire.SendRequest, _ []string) (any, error) {
			if r.Message || r.Back {
				if r.Message && r.Back {
					return nil, usage("--message and --back exclude each other")
				}
				if r.Kind != "" || r.ID != "" || r.Prepare || r.NoRepo {
					return nil, usage("--message and --back take no --kind, --id, --prepare or --no-repo")
				}
				return cfg.SendMessage(*r, a.s.In)
			}
			if r.Interrupt {
				return nil, usage("--interrupt goes with --message or --back")
			}
			return cfg.Send(*r, a.s.In)
		}),
		agentVerb(a, agentwire.Read, func(r *agentwire.ReadRequest, _ []string) (any, error) {
			return cfg.Read(r.Repo, r.Since, time.Duration(r.Wait)*time.Second)
		}),
		agentVerb(a, agentwire.Status, func(r *agentwire.RepoRequest, _ []string) (any, error) {
			return cfg.Status(r.Repo)
		}),
		agentVerb(a, agentwire.End, func(r *agentwire.RepoRequest, _ []string) (any, error) {
			return cfg.End(r.Repo)
		}),
		agentVerb(a, agentwire.WipeSecrets, func(r *agentwire.RepoRequest, _ []string) (any, error) {
			return cfg.WipeSecrets(r.Repo)
		}),
		agentVerb(a, agentwire.Restart, func(r *agentwire.RepoRequest, _ []string) (any, error) {
			return cfg.Restart(r.Repo)
		}),
		agentVerb(a, agentwire.Post, func(r *agentwire.PostRequest, _ []string) (any, error) {
			var kinds []string
			for k, on := range map[string]bool{"progress": r.Progress, "question": r.Question, "back": r.Back} {
				if on {
					kinds = append(kinds, k)
				}
			}
			if len(kinds) != 1 {
				return nil, usage("give exactly one of --progress, --question and --back")
			}
			return cfg.Post(repoOrEnv(r.Repo), kinds[0], a.s.In)
		}),
		agentVerb(a, agentwire.Env, func(r *agentwire.EnvRequest, _ []string) (any, error) {
			repo := repoOrEnv(r.Repo)
			res, err := cfg.Env(repo, r.NoWait)
			if err != nil || r.JSON {
				return res, err
			}
			a.printed = true
			io.WriteString(a.s.Out, boxagent.FormatEnv(repo, res.Report))
			return res, nil
		}),
		agentVerb(a, agentwire.Event, func(r *agentwire.EventRequest, args []string) (any, error) {
			var payload []byte
			if len(args) == 1 {
				// codex's notify passes its JSON as the last argument.
				payload = []byte(args[0])
			} else if f, ok := a.s.In.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
				var err error
				if payload, err = io.ReadAll(io.LimitReader(a.s.In, 1<<20)); err != nil {
					return nil, err
				}
			}
			return cfg.Event(r.Repo, r.CLI, r.Hook, payload)
		}),
		agentVerb(a, agentwire.SignIn, func(r *agentwire.SignInRequest, _ []string) (any, error) {
			return cfg.SignIn(*r, a.s.In)
		}),
		agentVerb(a, agentwire.Serve, func(*agentwire.ServeRequest, []string) (any, error) {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if err := cfg.Serve(ctx); err != nil {
				return nil, err
			}
			return agentwire.OKResult{OK: true}, nil
		}),
	}
}

// agentVerb is verb v's command: its flags bound to a request from v's
// table, and run's answer (or error) printed as the one JSON line.
func agentVerb[Req any](a *agentRun, v agentwire.Verb[Req], run func(req *Req, args []string) (any, error)) *cobra.Command {
	var req Req
	c := &cobra.Command{
		Use:   v.Use,
		Short: v.Short,
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.result(run(&req, args))
		},
	}
	if v.MaxArgs > 0 {
		c.Args = cobra.MaximumNArgs(v.MaxArgs)
	}
	v.Bind(c.Flags(), &req)
	c.Flags().SortFlags = false
	return c
}

func usage(msg string) error {
	return &boxagent.Error{Code: agentwire.CodeUsage, Err: errors.New(msg)}
}

// newAgentRelay is `cocoonbox-agent relay [--ready] HOST PORT`, the box
// half of a forwarded connection (package relay). Not an offload verb: its
// stdout is the stream, so no JSON line. Exit 0 when the target closed,
// 1 on an I/O failure, 2 usage, 3 (relay.ExitConnect) when the connect
// failed, each failure with one line on stderr.
func newAgentRelay(a *agentRun) *cobra.Command {
	var ready, check bool
	c := streamVerb(a, "relay [--ready] HOST PORT", "Connect stdin and stdout to HOST:PORT (port forwarding)",
		func(args []string) (int, error) {
			if check {
				if len(args) != 0 {
					return exitUsage, errors.New("relay --check takes no arguments")
				}
				return exitOK, nil
			}
			if len(args) != 2 {
				return exitUsage, errors.New("relay takes HOST PORT; see: cocoonbox-agent relay --help")
			}
			port, err := strconv.ParseUint(args[1], 10, 16)
			if err != nil || port == 0 {
				return exitUsage, fmt.Errorf("bad port %q: want 1 to 65535", args[1])
			}
			if err := relay.CheckTarget(args[0], uint32(port)); err != nil {
				return exitUsage, err
			}
			// No signal handler: INT, TERM and HUP end the relay at once.
			return relayExit(relay.Serve(context.Background(), args[0], uint32(port), a.s.In, a.s.Out, ready, a.relayEOF()))
		})
	c.Flags().BoolVar(&ready, "ready", false, "write one byte (0x06) on stdout once connected")
	c.Flags().BoolVar(&check, "check", false, "exit 0: this agent has the relay verb")
	return c
}

// streamVerb is the command use of a verb whose stdout is a stream, not
// a JSON line (relay, listen, take): run checks its arguments, and its
// error is one line on stderr and its exit status.
func streamVerb(a *agentRun, use, short string, run func(args []string) (int, error)) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			a.printed = true
			code, err := run(args)
			if err != nil {
				fmt.Fprintf(a.s.Err, "cocoonbox-agent: %v\n", err)
			}
			a.code = code
			return nil
		}}
}

// newAgentListen is `cocoonbox-agent listen (tcp HOST PORT | unix PATH |
// agent)`, the box half of a listener (relay.ServeListener: ssh -R, -A).
// Its stdout carries relay.Event lines, its stdin relay.Close lines; EOF
// on stdin, SIGHUP, SIGINT or SIGTERM end it, its sockets removed. Exit 0
// when ended so, 1 on a failure after listening, 2 usage, 4
// (relay.ExitListen) when it could not listen.
func newAgentListen(a *agentRun) *cobra.Command {
	return streamVerb(a, "listen (tcp HOST PORT | unix PATH | agent)", "Listen in the box and announce each connection for take (remote and agent forwarding)",
		func(args []string) (int, error) {
			spec, err := listenSpec(args)
			if err != nil {
				return exitUsage, err
			}
			if err := spec.Check(); err != nil {
				return exitUsage, err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			err = relay.ServeListener(ctx, spec, a.s.In, a.s.Out)
			if _, ok := errors.AsType[*relay.ListenError](err); ok {
				return relay.ExitListen, err
			}
			if err != nil {
				return exitFailure, err
			}
			return exitOK, nil
		})
}

// listenSpec reads listen's arguments.
func listenSpec(args []string) (relay.ListenSpec, error) {
	bad := errors.New("listen takes tcp HOST PORT, unix PATH or agent; see: cocoonbox-agent listen --help")
	switch {
	case len(args) == 3 && args[0] == "tcp":
		port, err := strconv.ParseUint(args[2], 10, 16)
		if err != nil {
			return relay.ListenSpec{}, fmt.Errorf("bad port %q: want 0 to 65535", args[2])
		}
		return relay.ListenSpec{Mode: relay.ListenTCP, Host: args[1], Port: uint32(port)}, nil
	case len(args) == 2 && args[0] == "unix":
		return relay.ListenSpec{Mode: relay.ListenUnix, Path: args[1]}, nil
	case len(args) == 1 && args[0] == "agent":
		return relay.ListenSpec{Mode: relay.ListenAgent}, nil
	}
	return relay.ListenSpec{}, bad
}

// newAgentTake is `cocoonbox-agent take CONTROL ID`: one connection a
// listener accepted, its descriptor received on the listener's CONTROL
// socket, then relayed as `relay --ready` does. Exit 0 when the
// connection closed, 1 on an I/O failure, 2 usage, 3 (relay.ExitConnect)
// when the connection has gone.
func newAgentTake(a *agentRun) *cobra.Command {
	return streamVerb(a, "take CONTROL ID", "Relay stdin and stdout to a connection a listener accepted",
		func(args []string) (int, error) {
			if len(args) != 2 {
				return exitUsage, errors.New("take takes CONTROL ID; see: cocoonbox-agent take --help")
			}
			id, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || id == 0 {
				return exitUsage, fmt.Errorf("bad connection id %q", args[1])
			}
			return relayExit(relay.Take(args[0], id, a.s.In, a.s.Out, a.relayEOF()))
		})
}

// relayEOF is where relay and take write their eof line: stderr when
// the laptop half asked for it (relay.EOFEnv), else nil.
func (a *agentRun) relayEOF() io.Writer {
	if a.env.Getenv(relay.EOFEnv) == "1" {
		return a.s.Err
	}
	return nil
}

// relayExit is the exit status of a relay's end (relay.Serve,
// relay.Take): 0, 3 (relay.ExitConnect) when there was no connection to
// relay, else 1.
func relayExit(err error) (int, error) {
	if _, ok := errors.AsType[*relay.ConnectError](err); ok {
		return relay.ExitConnect, err
	}
	if err != nil {
		return exitFailure, err
	}
	return exitOK, nil
}

// newAgentSession is `cocoonbox-agent session open|attach|list|holder`:
// the box half of sessions that outlive their Exec stream
// (docs/cocoonbox-agent.md), parsed by boxsession.Main as
// cocoonbox-session's are.
func newAgentSession(a *agentRun) *cobra.Command {
	return &cobra.Command{
		Use:                "session (open [--tty TERM:ROWSxCOLS[:MODES]] ID WINDOW -- LINE | attach [--owner TOKEN [--take]] ID | list)",
		Short:              "Run a command that outlives its stream (open), take it back (attach), list them",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			a.printed = true
			p := boxsession.Program{Name: "cocoonbox-agent session", HolderArgs: []string{"session", "holder"}}
			a.code = boxsession.Main(p, args, a.env.Getenv, a.s.In, a.s.Out, a.s.Err)
			return nil
		},
	}
}

// newAgentExecServe is the hidden `cocoonbox-agent exec-serve SOCKET`: a
// container box's exec server (package boxexec), which the local box
// starts in the box at each box start. Exit 0 when the host closed its
// connection, 1 on a failure.
func newAgentExecServe(a *agentRun) *cobra.Command {
	c := streamVerb(a, "exec-serve SOCKET", "Start the box's commands for the local box that listens at SOCKET (started by the local box)",
		func(args []string) (int, error) {
			if len(args) != 1 {
				return exitUsage, errors.New("exec-serve takes SOCKET; see: cocoonbox-agent exec-serve --help")
			}
			if err := boxexec.Serve(args[0]); err != nil {
				return exitFailure, err
			}
			return exitOK, nil
		})
	c.Hidden = true
	return c
}

// platform refuses cocoonbox-agent on Windows: it is the box half of
// offload, and boxes are Linux (the local box runs it on macOS too).
func platform(goos string) error {
	if goos == "" {
		goos = runtime.GOOS
	}
	if goos != "windows" {
		return nil
	}
	return &boxagent.Error{Code: agentwire.CodeRefused, Err: fmt.Errorf("the box half of offload runs in Linux boxes, not on Windows")}
}

// KillAtVar is the test hook of the journal's steps (docs/cli.md): set to
// OP:STEP, the process that reaches that step kills itself with SIGKILL
// once the journal names it, as kill -9 would. cocoonbox passes it on to
// the box half's verbs, whose steps it names the same way (send:index).
const KillAtVar = "COCOONBOX_TEST_KILL_AT"

// KillAt is the step func of KillAtVar read through getenv: it kills the
// process at the step named, never to return; nil when KillAtVar is unset.
func KillAt(getenv func(string) string) func(op, step string) {
	want := getenv(KillAtVar)
	if want == "" {
		return nil
	}
	return func(op, step string) {
		if op+":"+step == want {
			p, err := os.FindProcess(os.Getpid())
			if err == nil {
				p.Kill()
			}
			select {} // the kill is on its way
		}
	}
}

// versionTemplate and versionUsage are cli's, so that cocoonbox-agent's
// --version reads as the other binaries' do.
const (
	versionTemplate = "{{.Name}} version {{.Version}}\n"
	versionUsage    = "print the version and exit"
)
