package cli

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
	help "github.com/cocoonbox/cocoonbox/internal/usage"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// purgeOptions are the flags of `cocoonbox localbox purge`.
type purgeOptions struct {
	// Yes confirms; Orphans purges what local boxes whose state is gone
	// left, instead of this user's local box.
	Yes, Orphans bool
}

func newLocalboxPurge(env Env, s Streams) *cobra.Command {
	var o purgeOptions
	c := &cobra.Command{
		Use:   "purge [--orphans] --yes",
		Short: "Remove what the local box made on this machine: its boxes, its state, and the Unix users and claims it made as root",
		Long: `purge removes what this user's local box made on this machine, so that
nothing of it is left: its box commands and inboxes, its boxes (for good),
its state directory, this user's saved token and current endpoint for it
and its control masters; served by root, also the Unix users it made
(cocoonbox-owner_HASH, account users; their uids are never an account's
again) and its claims in /var/lib/cocoonbox/claims. A Unix user it was
given (user, --unix-user) stays. It refuses while the local box runs.

--orphans, as root, purges instead what every local box whose state
directory is gone left: the Unix users made for it, its claims, and the
containers, volumes and networks docker or podman hold for it (by their
org.cocoonbox.state label).

Without --yes it says what it would remove and exits 4. A purge cut short
is finished by the next.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return runLocalboxPurge(env, s, o) },
	}
	c.Flags().BoolVar(&o.Yes, "yes", false, "confirm: the boxes are deleted for good")
	c.Flags().BoolVar(&o.Orphans, "orphans", false, "as root, purge the Unix users, claims and engine objects of local boxes whose state directory is gone")
	return c
}

func runLocalboxPurge(env Env, s Streams, o purgeOptions) error {
	opts := localbox.PurgeOptions{ClaimsDir: claimsDir(env)}
	step := func(string) {}
	if f := killAt(env); f != nil {
		step = func(name string) { f("purge", name) }
	}
	opts.Step = step
	if o.Orphans {
		plan, err := localbox.PlanOrphans(opts)
		if errors.Is(err, localbox.ErrNeedsRoot) {
			return &ExitError{Code: ExitRefused, Err: errors.New("purge --orphans needs root: only a local box served by root makes Unix users and claims")}
		}
		if err != nil {
			return err
		}
		if plan.Empty() {
			fmt.Fprintln(s.Err, "no local box whose state is gone left a Unix user, a claim or a container, volume or network in an engine: nothing to purge")
			return nil
		}
		if !o.Yes {
			return &ExitError{Code: ExitNeedsYes, Err: fmt.Errorf("purging the orphans:%s\nto do it: cocoonbox localbox purge --orphans --yes%s", describePurge(plan, false), orphanStates(plan))}
		}
		if plan, err = localbox.PurgeOrphans(opts); err != nil {
			return err
		}
		fmt.Fprintf(s.Err, "purged the orphans: %s%s\n", donePurge(plan, nil), orphanStates(plan))
		return nil
	}

	dir, err := localboxDir(env)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := checkStateOwner(abs); err != nil {
		return err
	}
	running := func(ri localbox.Runtime) error {
		return &ExitError{Code: ExitRefused, Err: fmt.Errorf("the local box is running (pid %d); stop it first: cocoonbox localbox stop", ri.PID)}
	}
	if ri, ok := localbox.ReadRuntime(abs); ok {
		return running(ri)
	}
	plan, err := localbox.PlanPurge(abs, opts)
	if err != nil {
		return err
	}
	client, err := savedFor(env, abs)
	if err != nil {
		return err
	}
	if plan.Empty() && len(client) == 0 {
		fmt.Fprintf(s.Err, "nothing to purge: no local box state at %s, and no Unix user, claim or saved token of one\n", abs)
		return nil
	}
	if !o.Yes {
		return &ExitError{Code: ExitNeedsYes, Err: fmt.Errorf("purging the local box at %s:%s\nto do it: cocoonbox localbox purge --yes", abs, describePurge(plan, len(client) > 0))}
	}
	if plan.StateExists {
		// Held to the end, so that no start begins meanwhile; the
		// directory goes with the lock file in it.
		lock, err := localbox.Lock(abs)
		if errors.Is(err, localbox.ErrServing) {
			ri, _ := localbox.ReadRuntime(abs)
			return running(ri)
		}
		if err != nil {
			return err
		}
		defer lock.Close()
	}
	step("client")
	if err := forgetLocalbox(env, abs, client); err != nil {
		return err
	}
	if plan, err = localbox.Purge(abs, opts); err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "purged the local box at %s: %s\n", abs, donePurge(plan, client))
	return nil
}

// describePurge says what purging plan deletes, for its --yes error:
// one indented line a step, a long one wrapped (wrapItem), so that no
// line is cut at maxLine, however many boxes and users there are.
func describePurge(plan localbox.PurgePlan, client bool) string {
	var parts []string
	if len(plan.Boxes) > 0 {
		parts = append(parts, "deletes its boxes ("+strings.Join(plan.Boxes, ", ")+") for good and ends their commands")
	}
	if plan.Engine != "" {
		parts = append(parts, "removes its boxes' containers, volumes and networks from "+plan.Engine)
	}
	if len(plan.Users) > 0 {
		parts = append(parts, "deletes the Unix users it made ("+strings.Join(plan.Users, ", ")+")")
	}
	if len(plan.Kept) > 0 {
		parts = append(parts, "ends its processes of the Unix users it was given ("+strings.Join(plan.Kept, ", ")+"), which stay")
	}
	if len(plan.Claims) > 0 {
		parts = append(parts, "releases its claims of "+strings.Join(plan.Claims, ", "))
	}
	for _, o := range plan.Orphans {
		parts = append(parts, fmt.Sprintf("removes from %s the containers, volumes and networks of %s (below)", o.Engine, gone(len(o.States))))
	}
	if client {
		parts = append(parts, "forgets the token and endpoint saved for it")
	}
	if plan.StateExists {
		parts = append(parts, "removes its state directory")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(wrapItem(p, 100))
	}
	return b.String()
}

// wrapItem is item as lines of a list: "\n  " and its words up to width
// runes a line, then "\n    " before each further line. A word longer
// than width (a path) has a line of its own.
func wrapItem(item string, width int) string {
	return "\n  " + strings.ReplaceAll(help.Wrap(item, width-4), "\n", "\n    ")
}

// donePurge says what a purge did.
func donePurge(plan localbox.PurgePlan, client []string) string {
	var parts []string
	list := func(what string, xs []string) {
		if len(xs) > 0 {
			parts = append(parts, what+" "+strings.Join(xs, ", "))
		}
	}
	list("boxes deleted:", plan.Boxes)
	if plan.Engine != "" {
		parts = append(parts, "their containers, volumes and networks removed from "+plan.Engine)
	}
	list("Unix users deleted:", plan.Users)
	list("Unix users kept (not made by it):", plan.Kept)
	list("claims released:", plan.Claims)
	for _, o := range plan.Orphans {
		parts = append(parts, fmt.Sprintf("removed from %s the containers, volumes and networks of %s (below)", o.Engine, gone(len(o.States))))
	}
	list("forgot the saved endpoint", client)
	if plan.StateExists {
		parts = append(parts, "state directory removed")
	}
	return strings.Join(parts, "; ")
}

// gone counts n gone state directories.
func gone(n int) string {
	if n == 1 {
		return "1 gone state directory"
	}
	return fmt.Sprintf("%d gone state directories", n)
}

// orphanStates lists the gone state directories of plan's engine
// orphans, one a line after the sentence (a machine may hold many).
func orphanStates(plan localbox.PurgePlan) string {
	var b strings.Builder
	for _, o := range plan.Orphans {
		for _, st := range o.States {
			fmt.Fprintf(&b, "\n  %s: %s", o.Engine, st)
		}
	}
	return b.String()
}

// savedFor lists the endpoints this user's configuration keeps for the
// local box of state directory dir: its default unix socket when that is
// the current endpoint or has a token saved, and any endpoint whose saved
// token is the one `localbox start` issued there (dir's cli-token).
func savedFor(env Env, dir string) ([]string, error) {
	cfgDir, err := env.configDir()
	if err != nil {
		return nil, err
	}
	store := auth.FileStore{Dir: cfgDir}
	eps, err := store.Endpoints()
	if err != nil {
		return nil, err
	}
	cfg, err := box.LoadConfig(cfgDir)
	if err != nil {
		return nil, err
	}
	tok, _ := os.ReadFile(cliTokenPath(dir))
	t := strings.TrimSpace(string(tok))
	sock := "unix://" + localbox.SocketPath(dir)
	var out []string
	if cfg.Endpoint == sock {
		out = append(out, sock)
	}
	for _, ep := range eps {
		c, err := store.Get(ep)
		if err != nil || ep == sock && cfg.Endpoint == sock {
			continue
		}
		if ep == sock || c.Source == auth.SourceLocalbox && t != "" && c.Token == t {
			out = append(out, ep)
		}
	}
	return out, nil
}

// forgetLocalbox forgets eps, the endpoints savedFor found: their control
// masters end, their tokens are deleted, a self-signed certificate of
// dir's pinned for one is unpinned, and none stays the current endpoint.
func forgetLocalbox(env Env, dir string, eps []string) error {
	if len(eps) == 0 {
		return nil
	}
	cfgDir, err := env.configDir()
	if err != nil {
		return err
	}
	store := auth.FileStore{Dir: cfgDir}
	cfg, err := box.LoadConfig(cfgDir)
	if err != nil {
		return err
	}
	self, _ := os.ReadFile(filepath.Join(dir, "tls", "self-signed.crt"))
	for _, u := range eps {
		if ep, err := box.ParseEndpoint(u); err == nil {
			env.stopSharing(ep)
			if p := box.WithCA(ep, env.Getenv).CAFile; p != "" && !box.WithCA(ep, env.Getenv).CAFromEnv && len(self) > 0 {
				if b, err := os.ReadFile(p); err == nil && sameCert(b, self) {
					os.Remove(p)
				}
			}
		}
		if err := store.Delete(u); err != nil {
			return err
		}
		if cfg.Endpoint == u {
			if err := box.SaveConfig(cfgDir, box.Config{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// sameCert reports whether the PEM texts a and b begin with the same
// certificate.
func sameCert(a, b []byte) bool {
	x, _ := pem.Decode(a)
	y, _ := pem.Decode(b)
	return x != nil && y != nil && x.Type == "CERTIFICATE" && bytes.Equal(x.Bytes, y.Bytes)
}
