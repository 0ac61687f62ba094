// Package plumbing is the git configuration that offload's and back's own
// git commands run with, on the laptop (offload/) and in the box
// (boxagent/): one list, so the two halves cannot differ.
package plumbing

import (
	"os"
	"slices"
)

// Config is the -c options every git of ours runs with. The commands are
// ours, not the user's, so the repository's fsmonitor, hooks, commit
// signing, signature checks and auto-maintenance stay out of them
// (docs/offload.md "Git configuration").
//
// Clean and smudge filters stay: git add, update-index --refresh and
// read-tree -u need them for their results to be what the user's own git
// would make (a tree of LFS pointers, files checked out as the user's
// checkout writes them), and git has no switch for them short of naming
// each driver.
var Config = []string{
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=" + os.DevNull,
	"-c", "commit.gpgSign=false",
	"-c", "log.showSignature=false",
	"-c", "maintenance.auto=false",
}

// Args is a git command line's arguments (after "git") with Config in
// front, but for git config, whose answers would include the overrides.
func Args(args ...string) []string {
	if len(args) > 0 && args[0] == "config" {
		return args
	}
	return append(slices.Clip(Config), args...)
}
