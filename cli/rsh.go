package cli

import (
	"fmt"
	"strings"

	"github.com/cocoonbox/cocoonbox/shim"
	"github.com/spf13/cobra"
)

func newRsh(env Env, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "rsh [ssh options] BOX [COMMAND...] | --attach [BOX [ID]] | --list [--json] [BOX]",
		Short: "Run a command in a box, as ssh would",
		Long: `rsh runs COMMAND in BOX with ssh's semantics: the words are joined with
single spaces and run by the box user's shell in the workspace; stdout and
stderr stay apart; the exit status is the remote command's, or 255 for a
failure of ours. It takes ssh(1)'s options; see: cocoonbox-ssh --help.

Unless COCOONBOX_RESUME=off, a terminal session (rsh -t, a login shell)
outlives its connection and its client (killed, its terminal closed):
--list lists the box's terminal sessions (BOX: main), and --attach takes
a detached one back (the only one, or ID, or a prefix of it), with the
output the box had not seen acknowledged. Both come first, before any
ssh option.`,
		Example:            "  cocoonbox rsh main 'uname -a'\n  tar c . | cocoonbox rsh main tar x -C src\n  cocoonbox rsh --attach main",
		DisableFlagParsing: true,
		ValidArgsFunction:  rshBox(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
				return cmd.Help()
			}
			if len(args) > 0 && (args[0] == "--attach" || args[0] == "--list") {
				return exitStatus(rshSessions(env, s, args))
			}
			if f := lateSessionFlag(args); f != "" {
				// ssh's parser would say `unknown option -- -` and show
				// a usage without it.
				use := map[string]string{"--attach": "--attach [BOX [ID]]", "--list": "--list [BOX]"}[f]
				fmt.Fprintf(s.Err, "cocoonbox rsh: %s is rsh's own and comes first, before ssh's options: cocoonbox rsh %s\n", f, use)
				return exitStatus(shim.ExitFailure)
			}
			return exitStatus(runShim("cocoonbox rsh", args, env, s))
		},
	}
}

// newSSH is `cocoonbox ssh`, cocoonbox-ssh under the verb gh, coder and
// tsh use: the shim reads its whole command line, so cobra parses none
// of it.
func newSSH(env Env, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "ssh [ssh options] BOX [COMMAND...]",
		Short: "Open a shell in a box, or run a command there: cocoonbox-ssh's command line",
		Long: `ssh is cocoonbox-ssh: OpenSSH's command line, its options (-t, -T, -o,
-L, -D, -R, -W, -A, -G, -V, ...) and its semantics. With no COMMAND it
opens a login shell, with a terminal when stdin is one; else the words are
joined with single spaces and run by the box user's shell in the
workspace; stdout and stderr stay apart; the exit status is the remote
command's, or 255 for a failure of ours. --stdio HOST is the SSH-2 server
for ssh_config's ProxyCommand. rsh is the same. Unless
COCOONBOX_RESUME=off, a shell on a terminal outlives its client (killed,
its terminal closed): cocoonbox rsh --attach takes it back. See: man
cocoonbox-ssh, or cocoonbox-ssh --help.`,
		Example:            "  cocoonbox ssh main\n  cocoonbox ssh main 'uname -a'\n  cocoonbox ssh -L 8080:localhost:8080 main",
		DisableFlagParsing: true,
		ValidArgsFunction:  rshBox(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
				return cmd.Help()
			}
			if f := lateSessionFlag(args); f != "" {
				// A shell opened with `cocoonbox ssh main` is taken back
				// with rsh's flag; ssh's parser would call it unknown.
				use := map[string]string{"--attach": "--attach [BOX [ID]]", "--list": "--list [BOX]"}[f]
				fmt.Fprintf(s.Err, "cocoonbox ssh: %s is cocoonbox rsh's: cocoonbox rsh %s\n", f, use)
				return exitStatus(shim.ExitFailure)
			}
			return exitStatus(sshAs("cocoonbox ssh", args, env, s))
		},
	}
}

// exitStatus is the error that makes cocoonbox exit with code, already
// reported; nil for 0.
func exitStatus(code int) error {
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// lateSessionFlag is rsh's --attach or --list when it comes after
// options only (`rsh -t --attach`), where ssh's parser would take it for
// an option it lacks; "" when it comes after the box or a command word,
// whose own it is (`rsh main ls --list`), or after "--".
func lateSessionFlag(args []string) string {
	for _, a := range args {
		switch {
		case a == "--attach" || a == "--list":
			return a
		case a == "--" || !strings.HasPrefix(a, "-"):
			return ""
		}
	}
	return ""
}
