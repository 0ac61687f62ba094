// Cocoonbox-session is the lean entry point of the box half of resumable
// sessions: `cocoonbox-session open|attach|list`, the same as
// `cocoonbox-agent session` in a binary of only package boxsession, which
// every resumable command's start runs (docs/cocoonbox-agent.md "session").
package main

import (
	"os"

	"github.com/cocoonbox/cocoonbox/boxsession"
)

func main() {
	p := boxsession.Program{Name: "cocoonbox-session", HolderArgs: []string{"holder"}}
	os.Exit(boxsession.Main(p, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}
