package cli

import "github.com/cocoonbox/cocoonbox/agentcmd"

// Agent is cocoonbox-agent, the box half of offload: args without the
// program name. Every offload verb prints exactly one JSON line on stdout
// ({"ok":true,...} or {"ok":false,"code","error"}) and exits 0, 1 failed,
// 2 usage, 3 refused or 4 inbox (docs/cocoonbox-agent.md). The binary
// runs agentcmd.Main itself, without this package: this is the same for
// the tests that run it in process.
func Agent(args []string, env Env, s Streams) int {
	return agentcmd.Main(args, agentcmdEnv(env), agentcmd.Streams(s))
}

// agentcmdEnv is env as agentcmd reads it.
func agentcmdEnv(env Env) agentcmd.Env {
	return agentcmd.Env{Getenv: env.Getenv, Environ: env.Environ, GOOS: env.platform()}
}
