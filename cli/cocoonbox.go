package cli

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/agnivade/levenshtein"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/version"
)

// UsageError is a bad flag, argument or subcommand: exit status 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ExitError carries an exit status other than 1 for a failure that has
// already been reported, or none at all when Err is nil.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// Cocoonbox is the cocoonbox command: args without the program name.
func Cocoonbox(args []string, env Env, s Streams) int {
	root := newRoot(env, s)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	if ee, ok := errors.AsType[*ExitError](err); ok {
		if ee.Err != nil {
			printError(s, ee.Err)
		}
		return ee.Code
	}
	printError(s, err)
	if _, ok := errors.AsType[*UsageError](err); ok || isCobraUsage(err) {
		if cmd.HasParent() && !cmd.HasSubCommands() {
			fmt.Fprintf(s.Err, "usage: %s\n", cmd.UseLine())
		}
		fmt.Fprintf(s.Err, "see: %s --help\n", cmd.CommandPath())
		return ExitUsage
	}
	return ExitFailure
}

// maxLine is the longest line of an error message, in runes: a value
// echoed from an argument or a server is cut there.
const maxLine = 400

func printError(s Streams, err error) {
	fmt.Fprintf(s.Err, "cocoonbox: %s\n", printable.Lines(redactTokens(err.Error()), maxLine))
}

// tokenLike is anything shaped as a cocoonbox token ("cb_" and 64 hex
// digits, auth.ValidToken), upper-case hex too.
var tokenLike = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`cb_[0-9a-fA-F]{64}`) })

// redactTokens shows every token in msg as "cb_…": errors echo arguments
// (an unknown command, a bad endpoint), and a token typed in the wrong
// place must still never be printed.
func redactTokens(msg string) string {
	return tokenLike().ReplaceAllLiteralString(msg, "cb_…")
}

// isCobraUsage recognises the errors cobra makes itself for an unknown
// command; flag errors come through SetFlagErrorFunc as UsageError.
func isCobraUsage(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ")
}

// usageArgs wraps a cobra.PositionalArgs so that its errors exit 2 and
// name the command; on a command with subcommands, an argument it does
// not take is an unknown subcommand (unknownCommand).
func usageArgs(a cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := a(cmd, args); err != nil {
			if cmd.HasAvailableSubCommands() && len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
			return &UsageError{fmt.Errorf("%s: wrong arguments (%v)", name, err)}
		}
		return nil
	}
}

// noArgsCommand is the command use, which takes no arguments (usageArgs)
// and runs run.
func noArgsCommand(use, short string, run func() error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return run() }}
}

// groupsRefuseUnknown makes every command that only groups others (offload
// secrets, localbox, ...) print its help when called alone and exit 2 on
// an unknown subcommand; cobra would show the help and exit 0.
func groupsRefuseUnknown(c *cobra.Command) {
	for _, sub := range c.Commands() {
		groupsRefuseUnknown(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return unknownCommand(c, args[0])
		}
		return c.Help()
	}
}

// flagError is the usage error for a flag c does not take. Where c has
// subcommands and a word before the flag is none of them, that word is
// the mistake (`cocoonbox offlaod --kind claude` left cobra at the root,
// which has no --kind): unknownCommand.
func flagError(c *cobra.Command, err error) error {
	if a := c.Flags().Args(); c.HasAvailableSubCommands() && len(a) > 0 {
		return unknownCommand(c, a[0])
	}
	// pflag's words; it suggests nothing, nor does cobra for flags.
	if name, ok := strings.CutPrefix(err.Error(), "unknown flag: --"); ok {
		if near := nearFlag(c, name); near != "" {
			return &UsageError{fmt.Errorf("%w\ndid you mean: %s --%s", err, c.CommandPath(), near)}
		}
	}
	return &UsageError{err}
}

// nearFlag is the long flag of c (its own or inherited, not hidden)
// nearest to name, as unknownCommand's suggestions are: at most two edits
// away and at most half of name's letters, or one name begins; or "".
func nearFlag(c *cobra.Command, name string) string {
	if len(name) > 64 {
		return ""
	}
	best, bestD := "", 3
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := levenshtein.ComputeDistance(name, f.Name)
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) && d > 1 {
			d = 1
		}
		if d < bestD && 2*d <= len(name) {
			best, bestD = f.Name, d
		}
	})
	return best
}

// unknownCommand is the usage error for name, which is not a subcommand
// of c, with the subcommands it may be a typo of (cobra's SuggestionsFor:
// at most two edits away, a prefix, or a command's SuggestFor) on a line
// of its own: `boxs`, `localbox strat` and `boxes lst` get the command
// meant.
func unknownCommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, set only where cobra suggests itself
	}
	// SuggestionsFor names a command once for each way it matches (an
	// edit away and a SuggestFor of it): once each here.
	if s := slices.Compact(c.SuggestionsFor(name)); len(s) > 0 {
		for i := range s {
			s[i] = c.CommandPath() + " " + s[i]
		}
		msg += "\ndid you mean: " + strings.Join(s, ", ")
	} else if c.Parent() == nil && slices.Contains([]string{"attach", "reattach", "resume"}, name) {
		// screen -r's and tmux attach's word: a terminal left in a
		// box is taken back with rsh's own flag.
		msg += "\ndid you mean: cocoonbox rsh --attach"
	}
	return &UsageError{errors.New(msg)}
}

func newRoot(env Env, s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "cocoonbox",
		Short: "Work in a cocoonbox box with the tools you already use",
		Long: `cocoonbox signs you in, runs commands in your box (ssh, rsh), and runs a
local box on this machine (localbox). git reaches boxes through
git-remote-cocoonbox (cocoonbox::BOX/PATH), and ssh-expecting tools through
cocoonbox-ssh.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(flagError)
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return refusePlatform(env.platform(), c) }
	root.AddCommand(
		newSSH(env, s),
		newRsh(env, s),
		newBoxes(env, s),
		newLocalbox(env, s),
		newLogin(env, s),
		newLogout(env, s),
		newDevices(env, s),
		newOffload(env, s),
		newBack(env, s),
		newSSHConfig(env, s),
		newControlMaster(env, s),
		newVersion(s),
		newMan(),
		newMCP(env, s),
		newSetup(env, s),
	)
	// After the completion command is made, so that `completion tcsh`
	// is refused too.
	bashWithoutPackage(root)
	groupsRefuseUnknown(root)
	root.Version = version.String()
	root.SetVersionTemplate(versionTemplate)
	// Ours, so that it has -V (as ssh has); cobra answers any bool flag
	// named version, and adds its own (-v) only when there is none.
	root.Flags().BoolP("version", "V", false, versionUsage)
	return root
}
