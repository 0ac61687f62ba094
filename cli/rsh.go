package cli

import "github.com/spf13/cobra"

func newRsh(env Env, s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "rsh [ssh options] BOX [COMMAND...]",
		Short: "Run a command in a box, as ssh would",
		Long: `rsh runs COMMAND in BOX with ssh's semantics: the words are joined with
single spaces and run by the box user's shell in the workspace; stdout and
stderr stay apart; the exit status is the remote command's, or 255 for a
failure of ours. It takes ssh(1)'s options; see: cocoonbox-ssh --help.`,
		Example:            "  cocoonbox rsh main 'uname -a'\n  tar c . | cocoonbox rsh main tar x -C src",
		DisableFlagParsing: true,
		ValidArgsFunction:  rshBox(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
				return cmd.Help()
			}
			if code := runShim("cocoonbox rsh", args, env, s); code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		},
	}
}
