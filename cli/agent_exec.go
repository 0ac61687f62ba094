package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/boxexec"
)

// newAgentExecServe is the hidden `cocoonbox-agent exec-serve SOCKET`: a
// container box's exec server (package boxexec), which the local box
// starts in the box at each box start. Exit 0 when the host closed its
// connection, 1 on a failure.
func newAgentExecServe(a *agentRun) *cobra.Command {
	c := streamVerb(a, "exec-serve SOCKET", "Start the box's commands for the local box that listens at SOCKET (started by the local box)",
		func(args []string) (int, error) {
			if len(args) != 1 {
				return ExitUsage, errors.New("exec-serve takes SOCKET; see: cocoonbox-agent exec-serve --help")
			}
			if err := boxexec.Serve(args[0]); err != nil {
				return ExitFailure, err
			}
			return ExitOK, nil
		})
	c.Hidden = true
	return c
}
