package cli

import (
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/cocoonbox/cocoonbox/agentcmd"
	"github.com/cocoonbox/cocoonbox/boxsession"
)

// manDate is the date the man pages carry; a fixed one, so that a page
// changes only with its text (the test that keeps them current compares
// bytes).
var manDate = time.Date(2026, time.December, 1, 0, 0, 0, 0, time.UTC)

// newMan is the hidden `cocoonbox __man DIR`, a build step (make man, the
// release's before-hook), not a user's command: it writes manPages into
// DIR. It is hidden, and named, as cobra's own __complete.
func newMan() *cobra.Command {
	return &cobra.Command{
		Use:    "__man DIR",
		Short:  "Write the five binaries' man pages into DIR (make man)",
		Hidden: true,
		Args:   usageArgs(cobra.ExactArgs(1)),
		RunE:   func(_ *cobra.Command, a []string) error { return manPages(a[0]) },
	}
}

// manPages writes the section-1 man pages of the five binaries into dir:
// cocoonbox's and cocoonbox-agent's from their cobra trees (one page per
// command, as cobra/doc's GenManTree makes them), cocoonbox-ssh's,
// git-remote-cocoonbox's and cocoonbox-session's from the text their
// --help prints. `cocoonbox
// ssh`'s page would be cocoonbox-ssh.1 too: the binary's, written last,
// is the one, as git-commit(1) serves `git commit`.
func manPages(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	none := Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	env := Env{Getenv: func(string) string { return "" }}
	root := newRoot(env, none)
	root.InitDefaultCompletionCmd()
	agent := agentcmd.Root(agentcmdEnv(env), agentcmd.Streams(none))
	for _, c := range []*cobra.Command{root, agent} {
		c.DisableAutoGenTag = true
		h := &doc.GenManHeader{Section: "1", Date: &manDate, Source: "cocoonbox", Manual: "cocoonbox manual"}
		if err := doc.GenManTree(c, h, dir); err != nil {
			return err
		}
	}
	for name, b := range map[string][]byte{
		"cocoonbox-ssh.1":        sshPage("cocoonbox-ssh").Roff(manDate, "cocoonbox"),
		"git-remote-cocoonbox.1": gitRemotePage.Roff(manDate, "cocoonbox"),
		"cocoonbox-session.1":    boxsession.HelpPage("cocoonbox-session").Roff(manDate, "cocoonbox"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
