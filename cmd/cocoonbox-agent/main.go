// Cocoonbox-agent is the box half of cocoonbox offload: `cocoonbox-agent
// offload <verb>` runs inside a box, driven by the laptop through
// `cocoonbox rsh`, by the box CLI's hooks and by the box agent itself, and
// `offload serve` is the box's inbox. See docs/cocoonbox-agent.md. It
// links agentcmd, not cli: each start initialises the box half only.
package main

import (
	"os"

	"github.com/cocoonbox/cocoonbox/agentcmd"
)

func main() {
	env := agentcmd.Env{Getenv: os.Getenv, Environ: os.Environ()}
	os.Exit(agentcmd.Main(os.Args[1:], env, agentcmd.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
