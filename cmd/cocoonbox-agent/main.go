// Cocoonbox-agent is the box half of cocoonbox offload: `cocoonbox-agent
// offload <verb>` runs inside a box, driven by the laptop through
// `cocoonbox rsh`, by the box CLI's hooks and by the box agent itself, and
// `offload serve` is the box's inbox. See docs/cocoonbox-agent.md.
package main

import (
	"os"

	"github.com/cocoonbox/cocoonbox/cli"
)

func main() { os.Exit(cli.Agent(os.Args[1:], cli.SystemEnv(), cli.System())) }
