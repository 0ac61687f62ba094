// Cocoonbox-ssh is an ssh(1) look-alike that runs commands in cocoonbox
// boxes: `rsync -e cocoonbox-ssh`, GIT_SSH=cocoonbox-ssh, `scp -S` and every
// ssh-expecting tool use it in ssh's place. See docs/cocoonbox-ssh.md.
package main

import (
	"os"

	"github.com/cocoonbox/cocoonbox/cli"
)

func main() { os.Exit(cli.SSH(os.Args[1:], cli.SystemEnv(), cli.System())) }
