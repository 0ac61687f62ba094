package cli

import (
	"fmt"

	"github.com/cocoonbox/cocoonbox/agentcmd"
	"github.com/cocoonbox/cocoonbox/offload"
)

// killAtVar is the test hook of the journal's steps (docs/cli.md): set to
// OP:STEP, the process that reaches that step kills itself with SIGKILL
// once the journal names it, as kill -9 would; cocoonbox passes it on to
// the box half's verbs, whose steps it names the same way (send:index).
const killAtVar = agentcmd.KillAtVar

// killAt is the offload.StepFunc of killAtVar, or nil when it is unset.
func killAt(env Env) offload.StepFunc {
	return agentcmd.KillAt(env.Getenv)
}

// agentEnv is the environment offload adds to the box half's verbs:
// killAtVar, when set.
func agentEnv(env Env) map[string]string {
	if v := env.Getenv(killAtVar); v != "" {
		return map[string]string{killAtVar: v}
	}
	return nil
}

// notice prints the one line of an offload, back or abandon that says
// what became of one that was interrupted.
func notice(s Streams) func(string) {
	return func(line string) { fmt.Fprintln(s.Err, "cocoonbox: "+line) }
}
