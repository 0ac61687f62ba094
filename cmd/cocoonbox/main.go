// Cocoonbox is the cocoonbox command line: sign-in, rsh, boxes, offload and
// back, and the local box server (cocoonbox localbox). See docs/cocoonbox.md.
package main

import (
	"os"

	"github.com/cocoonbox/cocoonbox/cli"
)

func main() { os.Exit(cli.Cocoonbox(os.Args[1:], cli.SystemEnv(), cli.System())) }
