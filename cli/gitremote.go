package cli

import "fmt"

// GitRemote is git-remote-cocoonbox, git's remote helper for cocoonbox::
// URLs: args are git's (remote name and URL), without the program name.
func GitRemote(args []string, env Env, s Streams) int {
	fmt.Fprintln(s.Err, "git-remote-cocoonbox: not implemented yet")
	return 1
}
