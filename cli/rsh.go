package cli

import "github.com/spf13/cobra"

func newRsh(env Env, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "rsh [ssh options] BOX [COMMAND...] | --attach [BOX [ID]] | --list [BOX]",
		Short: "Run a command in a box, as ssh would",
		Long: `rsh runs COMMAND in BOX with ssh's semantics: the words are joined with
single spaces and run by the box user's shell in the workspace; stdout and
stderr stay apart; the exit status is the remote command's, or 255 for a
failure of ours. It takes ssh(1)'s options; see: cocoonbox-ssh --help.

With COCOONBOX_RESUME=on a terminal session outlives its connection and
its client: --list lists the box's terminal sessions (BOX: main), and
--attach takes a detached one back (the only one, or ID, or a prefix of
it), with the output the box had not seen acknowledged.`,
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
for ssh_config's ProxyCommand. rsh is the same. See: man cocoonbox-ssh,
or cocoonbox-ssh --help.`,
		Example:            "  cocoonbox ssh main\n  cocoonbox ssh main 'uname -a'\n  cocoonbox ssh -L 8080:localhost:8080 main",
		DisableFlagParsing: true,
		ValidArgsFunction:  rshBox(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
				return cmd.Help()
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
