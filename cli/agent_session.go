package cli

import (
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/boxsession"
)

// newAgentSession is `cocoonbox-agent session open|attach|holder`: the box
// half of sessions that outlive their Exec stream (docs/cocoonbox-agent.md).
func newAgentSession(a *agentRun) *cobra.Command {
	dir := func() string { return boxsession.Dir(a.env.Getenv) }
	self, _ := os.Executable()
	holderArgs := []string{"session", "holder"}
	c := &cobra.Command{
		Use:   "session",
		Short: "Run a command that outlives its stream (open), take it back (attach)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.fail(usage("give a verb: open or attach; see: cocoonbox-agent session --help"))
		},
	}
	open := streamVerb(a, "open ID WINDOW -- LINE", "Run LINE (empty: a login shell) as session ID, kept WINDOW while no client is attached; stdin and stdout carry its frames",
		func(args []string) (int, error) {
			if len(args) != 3 {
				return ExitUsage, errors.New("open takes ID WINDOW LINE; see: cocoonbox-agent session --help")
			}
			window, err := time.ParseDuration(args[1])
			if err != nil || window <= 0 {
				return ExitUsage, errors.New("bad window " + args[1] + ": want a duration such as 5m")
			}
			if err := boxsession.Open(dir(), self, holderArgs, args[0], window, args[2], a.s.In, a.s.Out); err != nil {
				return ExitFailure, err
			}
			return ExitOK, nil
		})
	attach := streamVerb(a, "attach ID", "Take session ID back: stdin and stdout carry its frames",
		func(args []string) (int, error) {
			if len(args) != 1 {
				return ExitUsage, errors.New("attach takes ID; see: cocoonbox-agent session --help")
			}
			if err := boxsession.Attach(dir(), self, holderArgs, args[0], a.s.In, a.s.Out); err != nil {
				return ExitFailure, err
			}
			return ExitOK, nil
		})
	holder := streamVerb(a, "holder", "Serve the box user's sessions until none is left (started by open)",
		func(args []string) (int, error) {
			if err := boxsession.Run(dir(), nil); err != nil {
				return ExitFailure, err
			}
			return ExitOK, nil
		})
	holder.Hidden = true
	c.AddCommand(open, attach, holder)
	return c
}
