package cli

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

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
}

func newLocalboxAccount(env Env, s Streams) *cobra.Command {
	var o accountOptions
	acct := &cobra.Command{
		Use:   "account",
		Short: "Add, list and remove the accounts of the local box (run as root on its machine)",
		Long: `account manages the people a local box served by root serves, as sshd has
users: each account's boxes run as a Unix user of its own, and its tokens
reach only its own boxes and devices. The owner runs these on the server's
machine, as root; they change the state directory's files, and a running
local box takes the change at once. A local box not served by root has one
account, its user's.`,
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
	acct.AddCommand(add, code, list, remove)
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
	made := "the existing"
	if a.Account.Created {
		made = "the new"
	}
	fmt.Fprintf(s.Err, "account %s added; its boxes run as %s Unix user `%s` (uid %d)\n", name, made, a.Account.UnixUser, a.Account.UID)
	if !localbox.ProcHidesOthers() {
		fmt.Fprintln(s.Err, hidepidNote)
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
		return map[string]any{"name": a.Name, "unix_user": a.UnixUser, "boxes": nonNil(a.Boxes), "devices": nonNil(a.Devices), "code_expires_at_ms": a.CodeExpiresAtMS, "removing": a.Removing}
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
	fmt.Fprintf(s.Err, "account %s removed: %s, %s; the Unix user `%s` %s\n", name, tokens, boxes, r.Account.UnixUser, user)
	return nil
}

// count is n and noun, plural but for one: "1 token", "2 tokens".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
