package cli

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// accountOptions are the flags of `cocoonbox localbox account …`.
type accountOptions struct {
	// UnixUser maps an existing Unix user; UserPrefix names a made one.
	UnixUser, UserPrefix string
	// Token asks add for a token instead of a sign-in code.
	Token bool
	// Yes confirms remove; JSON makes list print JSON lines.
	Yes, JSON bool
	// limitFlags and Reset are limits': the account's box limits, and
	// dropping its own before the flags apply.
	limitFlags
	Reset bool
}

func newLocalboxAccount(env Env, s Streams) *cobra.Command {
	var o accountOptions
	acct := &cobra.Command{
		Use:   "account",
		Short: "Add, list and remove the accounts of the local box (run as root on its machine)",
		Long: `account manages the people a local box served by root serves, as sshd has
users: each account's boxes run as a Unix user of its own (on a container
engine, as user in containers of their own, with no Unix user), and its
tokens reach only its own boxes and devices. The owner runs these on the
server's machine, as root; they change the state directory's files, and a
running local box takes the change at once. A local box not served by root
has one account, its user's.`,
		Args: usageArgs(cobra.NoArgs),
	}
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add an account and print its one-time sign-in code (or, with --token, a token)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE:  func(_ *cobra.Command, a []string) error { return runAccountAdd(env, s, o, a[0]) },
	}
	add.Flags().StringVar(&o.UnixUser, "unix-user", "", "run the account's boxes as this existing Unix user (default: make "+localbox.DefaultUserPrefix+"NAME)")
	add.Flags().StringVar(&o.UserPrefix, "user-prefix", localbox.DefaultUserPrefix, "what the Unix user the local box makes is named with, before NAME")
	add.Flags().BoolVar(&o.Token, "token", false, "print a token of the account on stdout instead of a sign-in code, for scripts")
	code := &cobra.Command{
		Use:   "code NAME",
		Short: "Print a new one-time sign-in code for an account (the old one stops working)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE:  func(_ *cobra.Command, a []string) error { return runAccountCode(env, s, a[0]) },
	}
	list := noArgsCommand("list", "List the accounts: name, Unix user, boxes, devices", func() error { return runAccountList(env, s, o) })
	list.Aliases = []string{"ls"}
	list.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object per account")
	remove := &cobra.Command{
		Use:     "remove NAME --yes",
		Aliases: []string{"rm"},
		Short:   "Remove an account: revoke its tokens, end its commands, delete its boxes and the Unix user made for it",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE:    func(_ *cobra.Command, a []string) error { return runAccountRemove(env, s, o, a[0]) },
	}
	remove.Flags().BoolVar(&o.Yes, "yes", false, "confirm: the account's boxes are deleted for good")
	limits := &cobra.Command{
		Use:   "limits NAME [--box-memory SIZE] [--box-cpus N] [--box-pids N] [--reset]",
		Short: "Show or set the limits of each box of an account on a container engine",
		Long: `limits prints the memory, CPUs and processes each box of account NAME gets
on a container engine; with flags it sets the account's own (remembered in
accounts.json), which its boxes get at once, running or asleep, and those
made later; what the account does not set is the local box's (localbox start
--box-memory, --box-cpus, --box-pids). --reset drops the account's own.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, a []string) error { return runAccountLimits(env, s, o, a[0]) },
	}
	limits.Flags().StringVar(&o.Memory, "box-memory", "", "each box's memory, such as 4g or 512m")
	limits.Flags().Float64Var(&o.CPUs, "box-cpus", 0, "each box's CPUs, such as 1.5")
	limits.Flags().Int64Var(&o.Pids, "box-pids", 0, "each box's processes and threads")
	limits.Flags().BoolVar(&o.Reset, "reset", false, "drop the account's own limits first: its boxes get the local box's")
	acct.AddCommand(add, code, list, remove, limits)
	return acct
}

// claimsDir is the machine-wide claims directory: $COCOONBOX_CLAIMS_DIR,
// else localbox.DefaultClaimsDir.
func claimsDir(env Env) string {
	if d := env.Getenv("COCOONBOX_CLAIMS_DIR"); d != "" {
		return d
	}
	return localbox.DefaultClaimsDir
}

// refusedAccounts is how the account verbs refuse on a local box not
// served by root: exit 3, nothing changed.
func refusedAccounts(err error) error {
	if errors.Is(err, localbox.ErrNeedsRoot) {
		return &ExitError{Code: ExitRefused, Err: err}
	}
	return err
}

// hidepidNote is what account add says on a machine whose /proc shows
// every user's command lines to every other (docs/self-hosting.md
// "Accounts").
const hidepidNote = "note: /proc is mounted without hidepid, so accounts see each other's command lines (ps), as users of one sshd host do; `mount -o remount,hidepid=invisible /proc` hides them (docs/self-hosting.md)"

func runAccountAdd(env Env, s Streams, o accountOptions, name string) error {
	dir, err := localboxDir(env)
	if err != nil {
		return err
	}
	if err := localbox.MkdirState(dir); err != nil {
		return err
	}
	a, err := localbox.AddAccount(dir, name, localbox.AddAccountOptions{UnixUser: o.UnixUser, UserPrefix: o.UserPrefix, ClaimsDir: claimsDir(env), Token: o.Token})
	if err != nil && !errors.Is(err, localbox.ErrNeedsRoot) && !localbox.ValidAccountName(name) {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if err != nil {
		return refusedAccounts(err)
	}
	if e := a.Account.Engine; e != "" {
		// Each box is a container with a pid namespace of its own: no
		// account sees another's processes, whatever /proc's mount.
		fmt.Fprintf(s.Err, "account %s added; its boxes run as `user` (uid 1000) in containers of their own (engine %s), with no Unix user on this machine\n", name, e)
	} else {
		made := "the existing"
		if a.Account.Created {
			made = "the new"
		}
		fmt.Fprintf(s.Err, "account %s added; its boxes run as %s Unix user `%s` (uid %d)\n", name, made, a.Account.UnixUser, a.Account.UID)
		if !localbox.ProcHidesOthers() {
			fmt.Fprintln(s.Err, hidepidNote)
		}
	}
	if o.Token {
		fmt.Fprintln(s.Out, a.Token)
		return nil
	}
	fmt.Fprintln(s.Out, a.Code)
	fmt.Fprintln(s.Err, codeHint(dir, name))
	return nil
}

// codeHint says what the person does with an account's sign-in code.
func codeHint(dir, name string) string {
	ep, ca := "https://THIS-SERVER:PORT", ""
	if ri, ok := localbox.ReadRuntime(dir); ok && !strings.HasPrefix(ri.Endpoint, "unix://") {
		ep = ri.Endpoint
		if ri.Laptop != "" {
			ep = ri.Laptop
		}
		if ri.CA != "" {
			ca = " --ca FILE (FILE a copy of " + ri.CA + ", the self-signed certificate)"
		}
	}
	hint := fmt.Sprintf("give %s the code above: it works once, for 24 hours; they run cocoonbox login --endpoint %s%s and type it on the sign-in page (docs/self-hosting.md \"Accounts\")", name, ep, ca)
	if ep == "https://THIS-SERVER:PORT" {
		// Served on its unix socket, or not at all: no laptop reaches it.
		hint += "; the local box must listen where they reach it first: cocoonbox localbox start --listen 0.0.0.0:7300 --tls self-signed (docs/self-hosting.md)"
	}
	return hint
}

func runAccountCode(env Env, s Streams, name string) error {
	dir, err := localboxDir(env)
	if err != nil {
		return err
	}
	code, err := localbox.NewAccountCode(dir, name)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.Out, code)
	fmt.Fprintln(s.Err, codeHint(dir, name))
	return nil
}

func runAccountList(env Env, s Streams, o accountOptions) error {
	dir, err := localboxDir(env)
	if err != nil {
		return err
	}
	as, err := localbox.ListAccounts(dir)
	if err != nil {
		return err
	}
	if ri, ok := localbox.ReadRuntime(dir); ok {
		as[0].UnixUser = ri.RunAs
	}
	return printList(s.Out, o.JSON, as, func(a localbox.AccountInfo) map[string]any {
		return map[string]any{"name": a.Name, "unix_user": a.UnixUser, "engine": a.Engine, "limits": a.Limits, "boxes": nonNil(a.Boxes), "devices": nonNil(a.Devices), "code_expires_at_ms": a.CodeExpiresAtMS, "removing": a.Removing}
	}, "NAME\tUNIX USER\tBOXES\tDEVICES\tSIGN-IN CODE", func(a localbox.AccountInfo) string {
		u := a.UnixUser
		if u == "" {
			u = "-"
		}
		code := "-"
		if a.CodeExpiresAtMS > time.Now().UnixMilli() {
			code = "unused, until " + when(a.CodeExpiresAtMS)
		}
		if a.Removing {
			code = "being removed: finish with account remove " + a.Name + " --yes"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%d\t%s", a.Name, u, strings.Join(nonNil(a.Boxes), ","), len(a.Devices), code)
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func runAccountRemove(env Env, s Streams, o accountOptions, name string) error {
	dir, err := localboxDir(env)
	if err != nil {
		return err
	}
	if !o.Yes {
		as, err := localbox.ListAccounts(dir)
		if err != nil {
			return err
		}
		for _, a := range as[1:] {
			if a.Name == name {
				return &ExitError{Code: ExitNeedsYes, Err: fmt.Errorf("removing account %s revokes its %s, ends its commands and deletes its boxes (%s) for good; to do it: cocoonbox localbox account remove %s --yes", name, count(len(a.Devices), "token"), strings.Join(a.Boxes, ", "), name)}
			}
		}
		if name == localbox.OwnerAccount {
			return fmt.Errorf("the owner's account cannot be removed: it is the local box's own")
		}
		return fmt.Errorf("no account %q; list them with: cocoonbox localbox account list", name)
	}
	reload := func() {
		// A running local box drops the account's tokens and boxes now.
		if ri, ok := localbox.ReadRuntime(dir); ok {
			proc.Signal(ri.PID, syscall.SIGHUP)
			time.Sleep(200 * time.Millisecond)
		}
	}
	r, err := localbox.RemoveAccount(dir, name, localbox.RemoveAccountOptions{ClaimsDir: claimsDir(env), Reload: reload})
	if err != nil {
		return refusedAccounts(err)
	}
	user := "kept (it was mapped, not made for the account)"
	if r.UserDeleted {
		user = "deleted"
	}
	tokens := count(r.Tokens, "token") + " revoked"
	boxes := "no boxes"
	if bs := nonNil(r.Boxes); len(bs) > 0 {
		boxes = "boxes deleted: " + strings.Join(bs, ", ")
	}
	if e := r.Account.Engine; e != "" {
		fmt.Fprintf(s.Err, "account %s removed: %s, %s; their containers and volumes removed from %s\n", name, tokens, boxes, e)
		return nil
	}
	fmt.Fprintf(s.Err, "account %s removed: %s, %s; the Unix user `%s` %s\n", name, tokens, boxes, r.Account.UnixUser, user)
	return nil
}

func runAccountLimits(env Env, s Streams, o accountOptions, name string) error {
	dir, err := localboxDir(env)
	if err != nil {
		return err
	}
	if o.limitFlags.set() || o.Reset {
		// Checked first, so that a bad value changes nothing.
		var given localbox.Limits
		if err := o.limitFlags.apply(&given); err != nil {
			return err
		}
		_, err := localbox.SetAccountLimits(dir, name, func(l *localbox.Limits) {
			if o.Reset {
				*l = localbox.Limits{}
			}
			o.limitFlags.apply(l)
		})
		if err != nil {
			return refusedAccounts(err)
		}
		// A running local box reads them now.
		if ri, ok := localbox.ReadRuntime(dir); ok {
			proc.Signal(ri.PID, syscall.SIGHUP)
		}
	}
	lim, own, err := localbox.AccountLimits(dir, name)
	if err != nil {
		return err
	}
	from := func(set bool) string {
		if set {
			return ""
		}
		return " (the local box's)"
	}
	fmt.Fprintf(s.Out, "account %s: each box %s of memory%s, %g CPUs%s, %d processes%s\n", name,
		units.BytesSize(float64(lim.MemoryBytes)), from(own.MemoryBytes != 0),
		float64(lim.NanoCPUs)/1e9, from(own.NanoCPUs != 0),
		lim.Pids, from(own.Pids != 0))
	if o.limitFlags.set() || o.Reset {
		fmt.Fprintf(s.Err, "its boxes get them now, running or asleep, and those made from now on\n")
		if set, err := localbox.ReadEngineSettings(dir); err == nil && set.Engine == localbox.EngineProcess {
			fmt.Fprintln(s.Err, "note: this local box runs its boxes on the process engine, which has no limits; they apply on a container engine (cocoonbox localbox start --engine docker)")
		}
	}
	return nil
}

// count is n and noun, plural but for one: "1 token", "2 tokens".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
