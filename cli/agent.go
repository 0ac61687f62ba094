package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cocoonbox/cocoonbox/agentwire"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/boxagent"
	"github.com/cocoonbox/cocoonbox/internal/version"
	"github.com/cocoonbox/cocoonbox/relay"
)

// Agent is cocoonbox-agent, the box half of offload: args without the
// program name. Every offload verb prints exactly one JSON line on stdout
// ({"ok":true,...} or {"ok":false,"code","error"}) and exits 0, 1 failed,
// 2 usage, 3 refused or 4 inbox (docs/cocoonbox-agent.md).
func Agent(args []string, env Env, s Streams) int {
	cfg := agentConfig(env, s)
	a := &agentRun{cfg: cfg, s: s, env: env}
	if err := agentPlatform(env.platform()); err != nil {
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
		return ExitOK
	}
	// Errors cobra found before a verb ran: unknown verbs and flags.
	a.fail(&boxagent.Error{Code: boxagent.CodeUsage, Err: err})
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
	a.code = ExitOK
	return nil
}

func (a *agentRun) fail(err error) error {
	e, ok := errors.AsType[*boxagent.Error](err)
	if !ok {
		e = &boxagent.Error{Code: boxagent.CodeFailed, Err: err}
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
	a.s.Out.Write(append(b, '\n'))
}

func newAgentRoot(a *agentRun) *cobra.Command {
	root := &cobra.Command{
		Use:   "cocoonbox-agent",
		Short: "The box half of cocoonbox offload",
		Long: `cocoonbox-agent runs inside a box. "offload" verbs move a task's copy in
and out of the box and talk to its inbox; each prints one JSON line.
"relay" connects stdin and stdout to a TCP port (port forwarding).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Help only on -h or --help: anything else prints the one line.
		Args:    cobra.ArbitraryArgs,
		Version: version.String(),
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return a.fail(usage(fmt.Sprintf("unknown command %q; see: cocoonbox-agent --help", args[0])))
			}
			return a.fail(usage("give a command: offload or relay; see: cocoonbox-agent --help"))
		},
	}
	root.SetVersionTemplate(versionTemplate)
	root.SetIn(a.s.In)
	root.SetOut(a.s.Out)
	root.SetErr(a.s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	off := &cobra.Command{
		Use:   "offload",
		Short: "Offload verbs: begin, send, read, status, end, wipe-secrets, restart, post, env, event, serve",
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return a.fail(usage(fmt.Sprintf("unknown verb %q; see: cocoonbox-agent offload --help", args[0])))
			}
			return a.fail(usage("give a verb: begin, send, read, status, end, wipe-secrets, restart, post, env, event or serve; see: cocoonbox-agent offload --help"))
		},
	}
	root.AddCommand(off)
	cfg := a.cfg
	var repo string
	repoFlag := func(c *cobra.Command, def string) {
		c.Flags().StringVar(&repo, "repo", "", "the repo key"+def)
	}
	// post and env run in the box CLI's session, which names its repo.
	repoOrEnv := func() string {
		if repo == "" {
			return a.env.Getenv("COCOONBOX_OFFLOAD_REPO")
		}
		return repo
	}

	var bo boxagent.BeginOptions
	begin := &cobra.Command{
		Use:   "begin --repo K --name N --kind C --id ID [--no-repo]",
		Short: "The box half of the preflight; take the copy for the offload",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			bo.Repo = repo
			return a.result(cfg.Begin(bo))
		},
	}
	repoFlag(begin, "")
	begin.Flags().StringVar(&bo.Name, "name", "", "the copy's directory name in the workspace")
	begin.Flags().StringVar(&bo.Kind, "kind", "", "the box CLI: claude, codex or cursor")
	begin.Flags().StringVar(&bo.ID, "id", "", "the offload id")
	begin.Flags().BoolVar(&bo.NoRepo, "no-repo", false, "no repository travels")

	var so boxagent.SendOptions
	var mo boxagent.MessageOptions
	var message bool
	send := &cobra.Command{
		Use:   "send --repo K --kind C --id ID [--prepare] [--no-repo] < stream\n  send --repo K (--message | --back) [--interrupt] < text",
		Short: "Take a send stream and start the box CLI, or hand a message or BACK to it",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if message || mo.Back {
				if message && mo.Back {
					return a.fail(usage("--message and --back exclude each other"))
				}
				if so.Kind != "" || so.ID != "" || so.Prepare || so.NoRepo {
					return a.fail(usage("--message and --back take no --kind, --id, --prepare or --no-repo"))
				}
				mo.Repo = repo
				return a.result(cfg.SendMessage(mo, a.s.In))
			}
			if mo.Interrupt {
				return a.fail(usage("--interrupt goes with --message or --back"))
			}
			so.Repo = repo
			return a.result(cfg.Send(so, a.s.In))
		},
	}
	repoFlag(send, "")
	send.Flags().StringVar(&so.Kind, "kind", "", "the box CLI: claude, codex or cursor")
	send.Flags().StringVar(&so.ID, "id", "", "the offload id")
	send.Flags().BoolVar(&so.Prepare, "prepare", false, "stop before the trust preset; run only the environment step")
	send.Flags().BoolVar(&so.NoRepo, "no-repo", false, "no repository travels")
	send.Flags().BoolVar(&message, "message", false, "send stdin as a message to the running session")
	send.Flags().BoolVar(&mo.Back, "back", false, "send BACK (and stdin, if any) to the running session")
	send.Flags().BoolVar(&mo.Interrupt, "interrupt", false, "press Esc first, then deliver at once")

	var since int
	var waitS, noWait, asJSON = 0, false, false
	read := &cobra.Command{
		Use:   "read --repo K [--since N] [--wait S]",
		Short: "Outbox entries after seq N; --wait long-polls up to S (at most 600) seconds",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return a.result(cfg.Read(repo, since, time.Duration(waitS)*time.Second))
		},
	}
	repoFlag(read, "")
	read.Flags().IntVar(&since, "since", 0, "the last seq already seen")
	read.Flags().IntVar(&waitS, "wait", 0, "seconds to wait for an entry, at most 600")

	status := &cobra.Command{
		Use:   "status [--repo K]",
		Short: "The box's sessions",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return a.result(cfg.Status(repo)) },
	}
	repoFlag(status, "")

	end := &cobra.Command{
		Use:   "end --repo K",
		Short: "End the CLI, wipe the secrets, mark the copy returned",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return a.result(cfg.End(repo)) },
	}
	repoFlag(end, "")

	wipe := &cobra.Command{
		Use:   "wipe-secrets --repo K",
		Short: "Remove the repo's secrets now",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return a.result(cfg.WipeSecrets(repo)) },
	}
	repoFlag(wipe, "")

	restart := &cobra.Command{
		Use:   "restart --repo K",
		Short: "Start the repo's CLI afresh from its last hand-over",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return a.result(cfg.Restart(repo)) },
	}
	repoFlag(restart, "")

	var progress, question, back bool
	post := &cobra.Command{
		Use:   "post (--progress | --question | --back) [--repo K] < body",
		Short: "Add an outbox entry (the box agent's report)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var kinds []string
			for k, on := range map[string]bool{"progress": progress, "question": question, "back": back} {
				if on {
					kinds = append(kinds, k)
				}
			}
			if len(kinds) != 1 {
				return a.fail(usage("give exactly one of --progress, --question and --back"))
			}
			return a.result(cfg.Post(repoOrEnv(), kinds[0], a.s.In))
		},
	}
	repoFlag(post, " (default: $COCOONBOX_OFFLOAD_REPO)")
	post.Flags().BoolVar(&progress, "progress", false, "a progress hand-over")
	post.Flags().BoolVar(&question, "question", false, "a question for the user")
	post.Flags().BoolVar(&back, "back", false, "the final hand-over; makes S'")

	envCmd := &cobra.Command{
		Use:   "env [--repo K] [--no-wait] [--json]",
		Short: "Wait for the environment step and print its report",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			repo = repoOrEnv()
			res, err := cfg.Env(repo, noWait)
			if err != nil || asJSON {
				return a.result(res, err)
			}
			a.printed, a.code = true, ExitOK
			io.WriteString(a.s.Out, boxagent.FormatEnv(repo, res.Report))
			return nil
		},
	}
	repoFlag(envCmd, " (default: $COCOONBOX_OFFLOAD_REPO)")
	envCmd.Flags().BoolVar(&noWait, "no-wait", false, "print the report as it stands, without the inbox")
	envCmd.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON line")

	var cliKind, hook string
	event := &cobra.Command{
		Use:   "event --repo K --cli C --hook NAME [PAYLOAD] < payload",
		Short: "A hook's report for the inbox (run by the box CLI)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var payload []byte
			if len(args) == 1 {
				// codex's notify passes its JSON as the last argument.
				payload = []byte(args[0])
			} else if f, ok := a.s.In.(*os.File); !ok || !isTerminal(f) {
				var err error
				if payload, err = io.ReadAll(io.LimitReader(a.s.In, 1<<20)); err != nil {
					return a.fail(err)
				}
			}
			return a.result(cfg.Event(repo, cliKind, hook, payload))
		},
	}
	repoFlag(event, "")
	event.Flags().StringVar(&cliKind, "cli", "", "the CLI kind")
	event.Flags().StringVar(&hook, "hook", "", "the hook's name")

	serve := &cobra.Command{
		Use:   "serve",
		Short: "Run the inbox (the box's service; the local box starts it)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if err := cfg.Serve(ctx); err != nil {
				return a.fail(err)
			}
			return a.result(boxagent.OKResult{OK: true}, nil)
		},
	}
	off.AddCommand(begin, send, read, status, end, wipe, restart, post, envCmd, event, serve)
	root.AddCommand(newAgentRelay(a))
	for _, c := range off.Commands() {
		c.Flags().SortFlags = false
	}
	return root
}

func usage(msg string) error {
	return &boxagent.Error{Code: boxagent.CodeUsage, Err: errors.New(msg)}
}

// newAgentRelay is `cocoonbox-agent relay [--ready] HOST PORT`, the box
// half of a forwarded connection (package relay). Not an offload verb: its
// stdout is the stream, so no JSON line. Exit 0 when the target closed,
// 1 on an I/O failure, 2 usage, 3 (relay.ExitConnect) when the connect
// failed, each failure with one line on stderr.
func newAgentRelay(a *agentRun) *cobra.Command {
	var ready, check bool
	c := &cobra.Command{
		Use:   "relay [--ready] HOST PORT",
		Short: "Connect stdin and stdout to HOST:PORT (port forwarding)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			a.printed = true
			fail := func(code int, err error) error {
				fmt.Fprintf(a.s.Err, "cocoonbox-agent: %v\n", err)
				a.code = code
				return nil
			}
			if check {
				if len(args) != 0 {
					return fail(ExitUsage, errors.New("relay --check takes no arguments"))
				}
				a.code = ExitOK
				return nil
			}
			if len(args) != 2 {
				return fail(ExitUsage, errors.New("relay takes HOST PORT; see: cocoonbox-agent relay --help"))
			}
			port, err := strconv.ParseUint(args[1], 10, 16)
			if err != nil || port == 0 {
				return fail(ExitUsage, fmt.Errorf("bad port %q: want 1 to 65535", args[1]))
			}
			if err := relay.CheckTarget(args[0], uint32(port)); err != nil {
				return fail(ExitUsage, err)
			}
			// No signal handler: INT, TERM and HUP end the relay at once.
			err = relay.Serve(context.Background(), args[0], uint32(port), a.s.In, a.s.Out, ready)
			if _, ok := errors.AsType[*relay.ConnectError](err); ok {
				return fail(relay.ExitConnect, err)
			}
			if err != nil {
				return fail(ExitFailure, err)
			}
			a.code = ExitOK
			return nil
		},
	}
	c.Flags().BoolVar(&ready, "ready", false, "write one byte (0x06) on stdout once connected")
	c.Flags().BoolVar(&check, "check", false, "exit 0: this agent has the relay verb")
	return c
}
