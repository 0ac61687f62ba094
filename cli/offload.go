package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
	"github.com/cocoonbox/cocoonbox/offload"
)

// defaultBox is the box offload uses without --box: the one every local
// box has.
const defaultBox = "main"

// offloadOptions are the flags of `cocoonbox offload` and its verbs.
type offloadOptions struct {
	Box            string
	Kind           string
	Yes            bool
	HandoverPrompt bool
	JSON           bool
	Wait           int
	// Force is install-cli's --force; Verbose is its -v, and offload's
	// (a timeline of its steps and calls on stderr).
	Force, Verbose bool
	// WithAPIKey is sign-in's --with-api-key.
	WithAPIKey bool
}

func newOffload(env Env, s Streams) *cobra.Command {
	var o offloadOptions
	var statusBox string
	cmd := &cobra.Command{
		Use:   "offload --kind claude|codex [--box BOX] [--yes]",
		Short: "Move this repository's task into a box and start a coding agent there",
		Long: `offload moves the work tree of the repository you are in (uncommitted and
untracked files included, ignored files not) and its history into a box, and
starts a fresh session of the chosen coding-agent CLI there on the hand-over
your local agent wrote. Nothing of your local work changes. Bring the work
home with cocoonbox back.

Write the hand-over first: offload handover-path prints where (and puts a
template there). In Claude Code, /cocoonbox:offload does both (cocoonbox
setup claude installs it; setup codex gives Codex the skill $cocoonbox-offload);
offload --handover-prompt prints the same request to paste into another
coding agent.

A kill at any point leaves a journal in the record: the next offload, back
or abandon finishes or undoes what was started, and says which.

Exit status: 0 done; 1 failed, rolled back; 2 usage; 3 refused, nothing
changed; 4 warnings that need --yes; 128+N stopped by signal N, rolled back.`,
		Example: `  cocoonbox offload install-cli --kind claude   # once per box
  cocoonbox offload sign-in --kind claude       # once per box (or --with-api-key < FILE)
  cocoonbox offload handover-path
  cocoonbox offload --kind claude
  cocoonbox offload inbox --wait 60
  cocoonbox back`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			if o.HandoverPrompt {
				return offloadExit(s, runHandoverPrompt(env, s, o))
			}
			if _, err := kindFlag(o.Kind); err != nil {
				return err
			}
			return offloadExit(s, runOffload(env, s, o))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Box, "box", defaultBox, "the box to offload to")
	f.StringVar(&o.Kind, "kind", "", kindHelp("the coding-agent CLI to run in the box"))
	f.BoolVarP(&o.Yes, "yes", "y", false, "go ahead despite the preflight's warnings")
	f.BoolVar(&o.HandoverPrompt, "handover-prompt", false, "print a request to paste into your coding agent: write the hand-over, then offload")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "print each step and each call to the box with its time on stderr")

	verb := func(use, short string, args cobra.PositionalArgs, run func([]string) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: usageArgs(args),
			RunE: func(_ *cobra.Command, a []string) error { return offloadExit(s, run(a)) }}
	}
	hp := verb("handover-path", "Print where the hand-over goes, with a template there if none", cobra.NoArgs,
		func([]string) error { return runHandoverPath(env, s) })
	status := verb("status", "Show the box CLI sessions of a box", cobra.NoArgs,
		func([]string) error { so := o; so.Box = statusBox; return runOffloadStatus(env, s, so) })
	// Its own variable: the verbs that share o.Box set its default to main.
	status.Flags().StringVar(&statusBox, "box", "", "the box (default: this repository's offload's, else main)")
	status.Flags().BoolVar(&o.JSON, "json", false, "print the sessions as JSON")
	inbox := verb("inbox", "Show what the box agent posted since you last looked", cobra.NoArgs,
		func([]string) error { return runOffloadInbox(env, s, o) })
	inbox.Flags().IntVar(&o.Wait, "wait", 0, "wait up to this many seconds (at most 600) for a new entry")
	send := verb("send TEXT", "Send a message to the box agent of this repository's offload", cobra.ExactArgs(1),
		func(a []string) error { return runOffloadSend(env, s, a[0]) })
	restart := verb("restart", "Start this offload's stopped box CLI session again from its last hand-over", cobra.NoArgs,
		func([]string) error { return runOffloadRestart(env, s) })
	restart.Long = `restart starts the box CLI session of this repository's offload afresh, from
the box agent's last hand-over (else the one it started from), when it
stopped before back: the CLI exited, or it crashed. Then bring the work home
with cocoonbox back.`
	var pruneDry bool
	prune := verb("prune", "Delete the refs/cocoonbox/ refs no offload in flight needs", cobra.NoArgs,
		func([]string) error { return runOffloadPrune(env, s, pruneDry) })
	prune.Long = `prune deletes this repository's refs under refs/cocoonbox/ that no offload
in flight needs: those of every offload but the one in flight (its S, its
index, back's S' and pre-back refs, abandon's kept work), and the box copy's
branches (refs/cocoonbox/box/*) when none is in flight. They stay after a
back or an abandon as a way back, until prune; the objects they name stay
until git's own gc. --dry-run lists them and deletes nothing.`
	prune.Flags().BoolVarP(&pruneDry, "dry-run", "n", false, "list what would go; delete nothing")
	abandon := verb("abandon", "End this repository's offload without merging, keeping the box's work in refs", cobra.NoArgs,
		func([]string) error { return runOffloadAbandon(env, s, o) })
	abandon.Long = `abandon ends this repository's offload when back cannot (its box CLI session
stopped, or end was run by hand in the box), or ends an offload the box
holds that this laptop has no record of. Your work tree, index and branches
do not change. The box copy's work comes home as refs only, so nothing of
it is lost:

  refs/cocoonbox/abandoned/<id>  the box copy's work tree, uncommitted and
                                 untracked files included, on its HEAD
  refs/cocoonbox/box/*           the box copy's branches

Then the box session ends (its secrets are wiped) and the record goes.
A session still running needs --yes. When the copy's work cannot come home
(git cannot take its tree), --yes moves the copy aside in the box
(<name>.abandoned-<id>) and ends the offload all the same.`
	abandon.Flags().StringVar(&o.Box, "box", defaultBox, "the box to look in when this laptop has no record of the offload")
	abandon.Flags().BoolVarP(&o.Yes, "yes", "y", false, "end a box session that is still running")
	secrets := &cobra.Command{Use: "secrets", Short: "Opt secrets in or out for this repository's offloads", Args: usageArgs(cobra.NoArgs),
		Long: `secrets lists, adds and removes the secrets that travel with this repository's
offloads: file:PATH (a git-ignored file in the repository), aws
(~/.aws/credentials), kube (~/.kube/config), gcloud (the application default
credentials) and ssh:KEY (~/.ssh/KEY). Only names and paths are stored; a
secret's content goes straight into the send stream, to a tmpfs in the box,
never through argv, the environment, a log or rsync.`}
	secrets.AddCommand(
		verb("list", "List this repository's opted-in secrets", cobra.NoArgs, func([]string) error { return runSecrets(env, s, "list", nil) }),
		verb("add ENTRY...", "Opt secrets in", cobra.MinimumNArgs(1), func(a []string) error { return runSecrets(env, s, "add", a) }),
		verb("remove ENTRY...", "Opt secrets out", cobra.MinimumNArgs(1), func(a []string) error { return runSecrets(env, s, "remove", a) }),
	)
	install := verb("install-cli --kind K", "Install a coding-agent CLI in the box with its vendor's installer", cobra.NoArgs,
		func([]string) error { return runInstallCLI(env, s, o) })
	signin := verb("sign-in --kind K [--with-api-key]", "Sign in to a coding-agent CLI inside the box, on this terminal or with an API key", cobra.NoArgs,
		func([]string) error { return runSignIn(env, s, o) })
	signin.Long = `sign-in signs the box's coding-agent CLI in, once per box. Without
--with-api-key it runs the vendor's own login in the box on this terminal and
opens its link in your browser. With --with-api-key it reads an API key from
stdin (a hidden prompt on a terminal, else stdin's first line) and keeps it in
the box where the CLI reads it: Claude Code's apiKeyHelper, Codex's own
codex login --with-api-key. The key never goes into an argument, an
environment variable or a log, only into a 0600 file in the box.`
	signin.Example = `  cocoonbox offload sign-in --kind claude
  cocoonbox offload sign-in --kind codex --with-api-key < ~/.config/openai.key
  printenv ANTHROPIC_API_KEY | cocoonbox offload sign-in --kind claude --with-api-key`
	signin.Flags().BoolVar(&o.WithAPIKey, "with-api-key", false, "read an API key from stdin and keep it in the box where the CLI reads it")
	install.Flags().BoolVar(&o.Force, "force", false, "replace a file in the way of the CLI in the box's ~/.local/bin (npm install --force)")
	install.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "show the installers' own output here instead of only in its log file")
	for _, c := range []*cobra.Command{install, signin} {
		c.Flags().StringVar(&o.Kind, "kind", "", kindHelp("the coding-agent CLI"))
		c.Flags().StringVar(&o.Box, "box", defaultBox, "the box")
	}
	for _, c := range []*cobra.Command{cmd, status, abandon, install, signin} {
		c.RegisterFlagCompletionFunc("box", boxNames(env, nil))
	}
	for _, c := range []*cobra.Command{cmd, install, signin} {
		c.RegisterFlagCompletionFunc("kind", kinds)
	}
	cmd.AddCommand(hp, status, inbox, send, restart, abandon, prune, secrets, install, signin)
	return cmd
}

// offloadExit prints an offload failure, its findings and next steps, and
// returns the exit status as an *ExitError.
func offloadExit(s Streams, err error) error {
	if err == nil {
		return nil
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return err
	}
	var oe *offload.Error
	if !errors.As(err, &oe) {
		return err
	}
	printError(s, oe.Err)
	printFindings(s.Err, oe.Findings)
	for _, n := range oe.Next {
		fmt.Fprintln(s.Err, stepLine(n))
	}
	return &ExitError{Code: oe.Code}
}

func printFindings(w io.Writer, fs []agentwire.Finding) {
	for _, f := range fs {
		// Findings come from the box too: what is in it must not reach the
		// terminal as control characters.
		fmt.Fprintf(w, "  %-7s %s: %s\n", printable.Line(string(f.Outcome), 0), printable.Line(f.Check, 0), printable.Line(f.Detail, 0))
	}
}

// offloadEnv is what every offload verb needs: the repository, the store;
// and, once connected, the client and the shim.
type offloadEnv struct {
	repo   *offload.Repo
	store  offload.Store
	client *box.Client
	shim   string
}

// interruptible returns a context that Ctrl-C or SIGTERM ends
// (signalExitContext), the func that stops it and closes oe's client,
// and the exit status the signal calls for (0 before any).
func (oe *offloadEnv) interruptible() (context.Context, func(), func() int) {
	ctx, stop, code := signalExitContext()
	return ctx, func() { stop(); oe.client.Close() }, code
}

// laptop is the offload.Laptop of a command on oe's repository that
// reaches the box through c and logs to logf, with the box half's
// progress, the notices and the test hook's kill points on s and env.
func (oe *offloadEnv) laptop(env Env, s Streams, c offload.Client, logf func(string, ...any)) offload.Laptop {
	return offload.Laptop{Repo: oe.repo, Store: oe.store, Client: c, Environ: env.Environ, Shim: oe.shim,
		Logf: logf, Progress: progressWriter(s), Notice: notice(s), AtStep: killAt(env)}
}

// connect opens the repository, finds cocoonbox-ssh and dials.
func connect(env Env) (*offloadEnv, error) {
	oe, err := openOffload(env)
	if err != nil {
		return nil, err
	}
	if oe.shim, err = shimCommand(); err != nil {
		return nil, err
	}
	if oe.client, err = env.dial(""); err != nil {
		return nil, err
	}
	return oe, nil
}

func openOffload(env Env) (*offloadEnv, error) {
	data, err := offload.DataDir(env.platform(), env.Getenv)
	if err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	r, err := offload.OpenRepo(context.Background(), wd, env.Environ)
	if errors.Is(err, offload.ErrNotRepo) {
		return nil, &offload.Error{Code: offload.ExitRefused,
			Findings: []agentwire.Finding{{Check: "git", Outcome: agentwire.Block, Detail: wd + " is not in a git work tree"}},
			Err:      errors.New("offload and back work on git repositories only"), Next: []offload.Step{{"cd into the repository, or git init and commit"}}}
	}
	if err != nil {
		return nil, err
	}
	return &offloadEnv{repo: r, store: offload.Store{Dir: filepath.Join(data, "offload")}}, nil
}

// shimCommand finds cocoonbox-ssh, beside this executable first, for
// rsync -e and GIT_SSH_COMMAND, quoted as one word.
func shimCommand() (string, error) {
	p := ""
	if exe, err := os.Executable(); err == nil {
		if c := filepath.Join(filepath.Dir(exe), "cocoonbox-ssh"); isExecutable(c) {
			p = c
		}
	}
	if p == "" {
		lp, err := exec.LookPath("cocoonbox-ssh")
		if err != nil {
			return "", &offload.Error{Code: offload.ExitRefused, Err: errors.New("cocoonbox-ssh is not installed beside cocoonbox or on PATH"),
				Next: []offload.Step{{"install the binaries with: make install"}}}
		}
		if p, err = filepath.Abs(lp); err != nil {
			return "", err
		}
	}
	return offload.QuoteCommand(p)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// progress is a Logf to stderr when it is a terminal, else nil: scripts
// get the result and the errors only.
func progress(s Streams) func(string, ...any) {
	if !isTerminal(s.Err) {
		return nil
	}
	return func(format string, args ...any) { fmt.Fprintf(s.Err, "cocoonbox: "+format+"\n", args...) }
}

// timed is the client and the Logf of an offload or back: with verbose
// a timeline on stderr of each progress line and each call to the box,
// else c itself and progress's.
func timed(c *box.Client, s Streams, verbose bool) (offload.Client, func(string, ...any)) {
	if !verbose {
		return c, progress(s)
	}
	tl := newTimeline(s.Err)
	return timedClient{c, tl}, tl.logf
}

func progressWriter(s Streams) io.Writer {
	if isTerminal(s.Err) {
		return s.Err
	}
	return nil
}

func runOffload(env Env, s Streams, o offloadOptions) error {
	kind, err := offload.LookupKind(o.Kind)
	if err != nil {
		return &UsageError{err}
	}
	oe, err := connect(env)
	if err != nil {
		return err
	}
	ctx, done, sigCode := oe.interruptible()
	defer done()
	pf := &offload.Preflight{
		GOOS:      env.platform(),
		Environ:   env.Environ,
		Listening: func(ctx context.Context) (map[int]bool, error) { return offload.ListeningPorts(ctx, env.platform()) },
		Resolve:   resolveIPs,
		SplitDNS:  func(ctx context.Context) []string { return offload.SplitDNSDomains(ctx, env.platform()) },
		Docker:    func(ctx context.Context) ([]string, error) { return offload.ComposeProjects(ctx, env.Environ) },
		Spell:     commandLine,
	}
	client, logf := timed(oe.client, s, o.Verbose)
	off := &offload.Offloader{Laptop: oe.laptop(env, s, client, logf), Box: o.Box, Kind: kind, Yes: o.Yes,
		Home: env.Getenv("HOME"), Preflight: pf, NoCompress: onThisMachine(oe.client.Endpoint()), AgentEnv: agentEnv(env)}
	res, err := off.Run(ctx)
	if err != nil {
		return stoppedExit(err, sigCode())
	}
	if len(res.Warnings) > 0 {
		fmt.Fprintln(s.Err, "cocoonbox: going ahead despite:")
		printFindings(s.Err, res.Warnings)
	}
	var total time.Duration
	var parts []string
	for _, t := range res.Timings {
		total += t.D
		parts = append(parts, fmt.Sprintf("%s %.1f", t.Step, t.D.Seconds()))
	}
	who := kind.Title()
	if cli := res.Begin.CLI; cli != nil {
		who = agentwire.Named(kind, cli.Version)
		switch {
		case cli.Account != "":
			who += ", signed in as " + cli.Account
		case cli.ByKey:
			who += ", signed in by key"
		}
	}
	fmt.Fprintf(s.Out, "offloaded to %s: %s, in %.1f s total: %s s\n", res.Record.BoxName, who, total.Seconds(), strings.Join(parts, ", "))
	if !res.Send.Accepted {
		fmt.Fprintf(s.Out, "the box CLI has not taken the first prompt yet; see: cocoonbox offload status\n")
		if len(res.Send.Screen) > 0 {
			// A first-run dialog the trust preset does not cover waits there.
			fmt.Fprintf(s.Out, "its screen shows:\n")
			for _, l := range res.Send.Screen {
				fmt.Fprintf(s.Out, "  | %s\n", printable.Line(l, 0))
			}
			fmt.Fprintf(s.Out, "if it asks something, answer it: cocoonbox rsh -t %s tmux attach -t %s (detach with Ctrl-b d)\n", res.Record.BoxName, res.Send.Tmux)
		}
	}
	fmt.Fprintf(s.Out, "watch:  cocoonbox offload inbox --wait 60\n")
	if res.Send.Tmux != "" {
		fmt.Fprintf(s.Out, "attach: cocoonbox rsh -t %s tmux attach -t %s\n", res.Record.BoxName, res.Send.Tmux)
	}
	fmt.Fprintf(s.Out, "home:   cocoonbox back\n")
	return nil
}

// resolveIPs looks a host name up with the system resolver.
func resolveIPs(ctx context.Context, host string) ([]net.IP, error) {
	as, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	ips := make([]net.IP, len(as))
	for i, a := range as {
		ips[i] = a.IP
	}
	return ips, err
}

func runHandoverPath(env Env, s Streams) error {
	p, err := ensureHandover(env)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.Out, p)
	return nil
}

// ensureHandover opens this repository, makes its directory and a
// template hand-over in it when there is none, and returns the
// hand-over's path.
func ensureHandover(env Env) (string, error) {
	oe, err := openOffload(env)
	if err != nil {
		return "", err
	}
	if _, err := oe.store.EnsureRepoDir(oe.repo.Key); err != nil {
		return "", err
	}
	p := oe.store.HandoverPath(oe.repo.Key)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		if err := atomicfile.WriteFile(p, offload.HandoverTemplate(), 0o600); err != nil {
			return "", err
		}
	}
	return p, nil
}

func runHandoverPrompt(env Env, s Streams, o offloadOptions) error {
	kind := o.Kind
	if kind != "" {
		if _, err := offload.LookupKind(kind); err != nil {
			return &UsageError{err}
		}
	}
	p, err := ensureHandover(env)
	if err != nil {
		return err
	}
	fmt.Fprint(s.Out, offload.HandoverPrompt(p, kind, commandLine))
	return nil
}

// flight is an offload in flight: its record and the box half of it.
type flight struct {
	*offloadEnv
	rec   *offload.Record
	agent *offload.Agent
	// signal is the status of the signal that ended the context, 0 for
	// none (signalExitContext).
	signal func() int
}

// stopped is err, when a signal ended the flight's context, as what
// (signalled).
func (f *flight) stopped(err error, what string) error { return signalled(f.signal, err, what) }

// inFlight loads this repository's record and dials its box; the
// context and the func are the flight's interruptible's.
func inFlight(env Env, s Streams) (*flight, context.Context, func(), error) {
	oe, err := openOffload(env)
	if err != nil {
		return nil, nil, nil, err
	}
	rec, err := oe.store.LoadRecord(oe.repo.Key)
	if errors.Is(err, offload.ErrNoRecord) {
		return nil, nil, nil, &offload.Error{Code: offload.ExitRefused, Err: err, Next: []offload.Step{{"offload it first: ", offload.Command{Verb: offload.VerbOffload, Kind: "KIND"}}}}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if oe.client, err = env.dial(""); err != nil {
		return nil, nil, nil, err
	}
	ctx, done, code := oe.interruptible()
	return &flight{offloadEnv: oe, rec: rec, agent: &offload.Agent{Exec: oe.client, Box: rec.BoxName, Progress: progressWriter(s)}, signal: code}, ctx, done, nil
}

func runOffloadStatus(env Env, s Streams, o offloadOptions) error {
	bx, key := o.Box, ""
	// interrupted says, after the table, that this repository's offload
	// in the box shown is left by a command that died, or that its record
	// cannot be read, and the way on.
	interrupted := func() {}
	if oe, err := openOffload(env); err == nil {
		rec, err := oe.store.LoadRecord(oe.repo.Key)
		if err == nil && (bx == "" || bx == rec.BoxName) {
			bx = rec.BoxName
			interrupted = func() {
				if line, next := oe.store.Interrupted(rec.Repo); line != "" {
					fmt.Fprintln(s.Err, "cocoonbox: "+line)
					for _, n := range next {
						fmt.Fprintln(s.Err, stepLine(n))
					}
				}
			}
		} else if errors.Is(err, offload.ErrBadRecord) {
			interrupted = func() { offloadExit(s, err) }
		}
	}
	if bx == "" {
		bx = defaultBox
	}
	var ss []agentwire.Session
	asleep := ""
	err := env.withCurrent(func(ctx context.Context, c *box.Client, code func() int) error {
		// A status read never wakes a box (boxes_ops.go).
		if b, err := c.Status(ctx, bx); err != nil {
			return signalled(code, err, "interrupted before box "+bx+" answered")
		} else if b.State != "running" {
			asleep = string(b.State)
			return nil
		}
		a := &offload.Agent{Exec: c, Box: bx, Progress: progressWriter(s)}
		var err error
		ss, err = a.Status(ctx, key)
		return signalled(code, err, "interrupted before box "+bx+" answered")
	})
	if err != nil {
		return err
	}
	if asleep != "" {
		if o.JSON {
			return writeJSON(s.Out, map[string]any{"box": bx, "state": asleep, "sessions": []agentwire.Session{}})
		}
		fmt.Fprintf(s.Out, "box %s is %s: not woken to look; its sessions are paused until it wakes (cocoonbox boxes wake %s)\n", printable.Line(bx, 80), asleep, printable.Line(bx, 80))
		return nil
	}
	defer interrupted()
	if o.JSON {
		return writeJSON(s.Out, map[string]any{"box": bx, "sessions": ss})
	}
	if len(ss) == 0 {
		fmt.Fprintf(s.Out, "no box CLI session in box %s\n", bx)
		return nil
	}
	tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCLI\tSTATUS\tCOPY\tOFFLOAD\tOUTBOX")
	for _, x := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", printable.Line(x.Name, 0), printable.Line(x.CLI, 0), printable.Line(x.Status, 0), printable.Line(x.Copy, 0), printable.Line(x.OffloadID, 0), x.OutboxSeq)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// What went wrong, beside the status: a line of its own each, as the
	// table's columns would not hold it.
	for _, x := range ss {
		if x.Fault != nil {
			fmt.Fprintf(s.Out, "%s: %s\n", printable.Line(x.Name, 0), statusText(x.Status, x.Fault))
			fmt.Fprintf(s.Out, "  see it: %s (detach with Ctrl-b d)\n", printable.Line(commandLine(offload.AttachCommand(bx, x.Repo, x.CLI)), 0))
		}
	}
	return nil
}

// statusText is a session's status with its fault, if any: "idle — last
// turn failed 40 s ago: API Error: ...", made printable.
func statusText(status string, f *agentwire.Fault) string {
	if f == nil {
		return printable.Line(status, 0)
	}
	return printable.Line(status+" — "+f.Ago(), 0)
}

func runOffloadInbox(env Env, s Streams, o offloadOptions) error {
	if o.Wait < 0 || o.Wait > 600 {
		return &UsageError{errors.New("--wait takes 0 to 600 seconds")}
	}
	f, ctx, done, err := inFlight(env, s)
	if err != nil {
		return err
	}
	defer done()
	rec := f.rec
	rd, err := f.agent.Read(ctx, rec.Repo, rec.Seen, time.Duration(o.Wait)*time.Second)
	if err != nil {
		return f.stopped(offload.GoneError(ctx, f.client, rec, err), "interrupted; nothing changed, and no entry was taken as shown")
	}
	seen := rec.Seen
	shown := 0
	for _, e := range rd.Entries {
		seen = max(seen, int64(e.Seq))
		if e.OffloadID != "" && e.OffloadID != rec.ID {
			continue // an earlier offload's, which its back showed
		}
		shown++
		t := time.UnixMilli(e.TimeMS).Format("15:04:05")
		fmt.Fprintf(s.Out, "#%d %s %s\n%s\n", e.Seq, printable.Text(e.Kind), t, printable.Text(strings.TrimRight(e.Body, "\n")))
		if e.Kind != "back" {
			fmt.Fprintln(s.Out)
		}
	}
	if shown == 0 {
		fmt.Fprintln(s.Out, "no new entry")
	}
	fmt.Fprintf(s.Out, "session: %s\n", statusText(rd.Status, rd.Fault))
	if rd.Fault != nil {
		fmt.Fprintf(s.Err, "cocoonbox: see the box CLI: %s (detach with Ctrl-b d)\n", commandLine(offload.AttachCommand(rec.BoxName, rec.Repo, rec.Kind)))
	}
	if line, next := f.store.Interrupted(rec.Repo); line != "" {
		fmt.Fprintln(s.Err, "cocoonbox: "+line)
		for _, n := range next {
			fmt.Fprintln(s.Err, stepLine(n))
		}
	} else if rd.Status == "stopped" {
		fmt.Fprintln(s.Err, "cocoonbox: the box CLI session has stopped, so back cannot ask it for its work")
		for _, n := range offload.StoppedNext() {
			fmt.Fprintln(s.Err, stepLine(n))
		}
	}
	if seen != rec.Seen {
		return f.store.UpdateSeen(rec.Repo, rec.ID, seen)
	}
	return nil
}

func runOffloadSend(env Env, s Streams, text string) error {
	if strings.TrimSpace(text) == "" {
		return &UsageError{errors.New("the message is empty")}
	}
	f, ctx, done, err := inFlight(env, s)
	if err != nil {
		return err
	}
	defer done()
	m, err := f.agent.Message(ctx, f.rec.Repo, text)
	if err != nil {
		err = f.stopped(offload.GoneError(ctx, f.client, f.rec, offload.MessageError(err)), "interrupted before the box answered; the message may have reached it: cocoonbox offload inbox shows the session")
		// Not restart: the journal names a step a command died in.
		if e, ok := errors.AsType[*offload.Error](err); ok && e.Code == offload.ExitRefused {
			if line, next := f.store.Interrupted(f.rec.Repo); line != "" {
				e.Next = append([]offload.Step{{line}}, next...)
			}
		}
		return err
	}
	fmt.Fprintf(s.Out, "message #%d %s\n", m.Seq, printable.Line(m.Delivery, 0))
	return nil
}

func runSecrets(env Env, s Streams, op string, args []string) error {
	oe, err := openOffload(env)
	if err != nil {
		return err
	}
	for _, a := range args {
		if _, err := offload.ParseSecret(a); err != nil {
			return &UsageError{err}
		}
	}
	if op == "add" {
		if err := oe.repo.CheckFileSecrets(context.Background(), args); err != nil {
			return &offload.Error{Code: offload.ExitRefused, Err: err}
		}
	}
	if op != "list" {
		err := oe.store.UpdateSettings(oe.repo.Key, oe.repo.Top, func(rs *offload.RepoSettings) error {
			if op == "add" {
				rs.Secrets = append(rs.Secrets, args...)
				return nil
			}
			for _, a := range args {
				if !slices.Contains(rs.Secrets, a) {
					return &offload.Error{Code: offload.ExitRefused, Err: fmt.Errorf("secret %s is not opted in for this repository; nothing changed", a)}
				}
			}
			rs.Secrets = slices.DeleteFunc(rs.Secrets, func(e string) bool { return slices.Contains(args, e) })
			return nil
		})
		if err != nil {
			return err
		}
	}
	if op == "add" {
		for _, a := range args {
			if err := offload.CheckSecret(a, oe.repo.Top, env.Getenv("HOME")); err != nil {
				fmt.Fprintf(s.Err, "cocoonbox: warning: %v; offload refuses until it is fixed\n", err)
			}
		}
	}
	all, err := oe.store.LoadSettings()
	if err != nil {
		return err
	}
	list := all[oe.repo.Key].Secrets
	for _, e := range list {
		fmt.Fprintln(s.Out, e)
	}
	if len(list) == 0 {
		fmt.Fprintln(s.Err, "cocoonbox: no secret is opted in for this repository")
	}
	return nil
}

// kindHelp is --kind's help: what, then the kinds that can be used, then
// those that cannot yet (agentwire.Kind's Unsupported).
func kindHelp(what string) string {
	var later []string
	for _, k := range agentwire.Kinds() {
		if k.Unsupported() != "" {
			later = append(later, k.Name())
		}
	}
	h := what + ": " + agentwire.OrList(offload.KindNames())
	switch len(later) {
	case 0:
		return h
	case 1:
		return h + " (" + later[0] + " is not supported yet)"
	}
	return h + " (" + strings.Join(later, ", ") + " are not supported yet)"
}

// kindFlag is the --kind of a verb that needs one: missing or unknown is
// a usage error naming the kinds.
func kindFlag(name string) (agentwire.Kind, error) {
	if name == "" {
		return nil, &UsageError{fmt.Errorf("--kind is required: %s", strings.Join(offload.KindNames(), ", "))}
	}
	kind, err := offload.LookupKind(name)
	if err != nil {
		return nil, &UsageError{err}
	}
	return kind, nil
}

func runInstallCLI(env Env, s Streams, o offloadOptions) error {
	kind, err := kindFlag(o.Kind)
	if err != nil {
		return err
	}
	return env.withCurrent(func(ctx context.Context, c *box.Client, code func() int) error {
		run := func(ctx context.Context, line string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
			// A login shell, as the box CLI runs in: the user's profile may put
			// npm (nvm) and ~/.local/bin on PATH.
			st, err := c.Exec(ctx, &box.Command{Box: o.Box, Line: `exec "${SHELL:-/bin/sh}" -lc ` + shellquote.Word(line),
				Stdin: stdin, Stdout: stdout, Stderr: stderr, Progress: s.Err})
			switch {
			case err != nil:
				return 0, err
			case st.Error != "" || st.Signal != "":
				return 0, errors.New(st.Text())
			}
			return st.Code, nil
		}
		// A box that is not there is said before any line of the install's
		// (and a sleeping one wakes here, its lines first).
		if _, err := run(ctx, "true", nil, io.Discard, io.Discard); err != nil {
			return signalled(code, err, "interrupted before install-cli began in box "+o.Box+"; nothing changed")
		}
		in := &offload.Installer{Kind: kind, Run: run, Box: o.Box, Log: s.Err, Output: s.Err, Force: o.Force}
		var logPath string
		if !o.Verbose {
			// npm's upgrade notices and install-script warnings, and the vendor
			// installer's progress, are for a look afterwards, not for here.
			f, path, err := installLog(env)
			if err != nil {
				return err
			}
			defer f.Close()
			in.Output, in.EchoErrors, logPath = f, true, path
			fmt.Fprintf(s.Err, "cocoonbox: the installers' own output goes to %s (-v shows it here)\n", path)
		}
		res, err := in.Install(ctx)
		err = signalled(code, err, "interrupted; what install-cli began in box "+o.Box+" may be half done: run it again")
		if oe, ok := errors.AsType[*offload.Error](err); ok && logPath != "" {
			oe.Next = append(oe.Next, offload.Step{"the installers' whole output is in " + logPath})
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(s.Out, "installed %s in box %s (%s); now sign in: cocoonbox offload sign-in --kind %s --box %s\n",
			agentwire.Named(kind, res.Version), o.Box, map[string]string{"npm": "from npm", "installer": "with its installer"}[res.Via], kind.Name(), o.Box)
		return nil
	})
}

// installLog is a new, empty STATE/install-cli.log (0600, in a 0700
// directory) and its path.
func installLog(env Env) (*os.File, string, error) {
	dir, err := env.stateDir()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "install-cli.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, "", err
	}
	return f, path, nil
}

func runOffloadRestart(env Env, s Streams) error {
	oe, err := openOffload(env)
	if err != nil {
		return err
	}
	return env.withCurrent(func(ctx context.Context, c *box.Client, code func() int) error {
		rec, err := offload.Restart(ctx, oe.store, oe.repo.Key, c)
		if err != nil {
			return signalled(code, err, "interrupted before the box answered; it may have restarted the session: cocoonbox offload status shows it")
		}
		fmt.Fprintf(s.Out, "restarted the box CLI session in box %s from its last hand-over\n", rec.BoxName)
		fmt.Fprintf(s.Out, "watch:  cocoonbox offload inbox --wait 60\n")
		fmt.Fprintf(s.Out, "home:   cocoonbox back\n")
		return nil
	})
}

func runOffloadPrune(env Env, s Streams, dryRun bool) error {
	oe, err := openOffload(env)
	if err != nil {
		return err
	}
	keep, err := oe.repo.InFlight(oe.store)
	if err != nil {
		return err
	}
	gone, err := oe.repo.Prune(context.Background(), keep, dryRun)
	if err != nil {
		return err
	}
	verb := "deleted"
	if dryRun {
		verb = "would delete"
	}
	for _, ref := range gone {
		fmt.Fprintf(s.Out, "%s %s\n", verb, ref)
	}
	kept := ""
	if keep != "" {
		kept = "; kept those of offload " + keep + ", in flight"
	}
	fmt.Fprintf(s.Err, "%s %d refs under refs/cocoonbox/%s\n", verb, len(gone), kept)
	return nil
}

func runOffloadAbandon(env Env, s Streams, o offloadOptions) error {
	oe, err := connect(env)
	if err != nil {
		return err
	}
	ctx, done, sigCode := oe.interruptible()
	defer done()
	l := oe.laptop(env, s, oe.client, progress(s))
	// Abandon shows no progress of the box half's verbs.
	l.Progress = nil
	a := &offload.Abandoner{Laptop: l, Box: o.Box, Yes: o.Yes}
	res, err := a.Run(ctx)
	if err != nil {
		return stoppedExit(err, sigCode())
	}
	if res.Nothing {
		fmt.Fprintf(s.Out, "nothing left to abandon of offload %s\n", res.ID)
		return nil
	}
	if res.Aside != "" {
		fmt.Fprintf(s.Out, "abandoned offload %s in box %s; your work tree is untouched; the box copy's work could not come here, and stays in the box at %s\n", res.ID, res.BoxName, res.Aside)
		return nil
	}
	if res.Gone != "" {
		fmt.Fprintf(s.Out, "abandoned offload %s: %s, so none of its work could be kept\n", res.ID, res.Gone)
		return nil
	}
	fmt.Fprintf(s.Out, "abandoned offload %s in box %s; your work tree is untouched, and the box's work is kept in:\n", res.ID, res.BoxName)
	for _, r := range res.Kept {
		fmt.Fprintf(s.Out, "  %s\n", r)
	}
	if res.Base != "" {
		fmt.Fprintf(s.Out, "what the box changed: git diff %s%s %s%s\n", offload.RefOffload, res.ID, offload.RefAbandoned, res.ID)
	}
	fmt.Fprintf(s.Out, "its commits:          git log %s%s\n", offload.RefAbandoned, res.ID)
	return nil
}

// onThisMachine says whether ep is a box service on this machine: a unix
// socket, or a loopback address. rsync's -z only costs CPU there
// (docs/offload.md, step 8).
func onThisMachine(ep box.Endpoint) bool {
	if strings.HasPrefix(ep.Target, "unix:") {
		return true
	}
	host, _, err := net.SplitHostPort(ep.Target)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
