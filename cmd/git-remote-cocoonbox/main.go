// Git-remote-cocoonbox is git's remote helper for cocoonbox::BOX/PATH URLs:
// git clone, fetch, push, ls-remote and archive --remote reach repositories
// in a box through it. See docs/git-remote-cocoonbox.md.
package main

import (
	"os"

	"github.com/cocoonbox/cocoonbox/cli"
)

func main() { os.Exit(cli.GitRemote(os.Args[1:], cli.SystemEnv(), cli.System())) }
