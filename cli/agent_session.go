package cli

import (
	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/boxsession"
)

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
