package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/offload"
)

func newBack(env Env, s Streams) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "back",
		Short: "Bring this repository's offloaded work home",
		Long: `back asks the box agent to finish and write its hand-over, waits for it (600 s
at most), fetches the box's commits with git over cocoonbox-ssh, and merges
them without ever touching your uncommitted work:

  fast-forward  when the repository is as you offloaded it: the work tree
                moves to the box's, the branch to the box's commits
  merged        when you changed other files since: the box's changes are
                applied uncommitted beside yours
  branch        when both changed the same files, or the box's work would
                overwrite a file git ignores or does not track here, a file
                you staged or told git to skip, or a merge, rebase or
                cherry-pick is in progress: the box's work is on the branch
                cocoonbox/back-<UTC time> and your tree is untouched

Uncommitted and untracked work travels with the offload: the box agent
starts from it, so it may come back inside the box agent's commits.

The box agent's hand-over is printed on stdout and kept beside the record.
refs/cocoonbox/pre-back/<id> names HEAD as it was before back moved it.

Files that were untracked when you offloaded are never removed, even when the
box's .gitignore now ignores them. refs/cocoonbox/pre-back-work/<id> names
your work tree as it was before back changed it.

While it waits for the hand-over it says so once on stderr; Ctrl-C (or
SIGTERM) then stops waiting with nothing changed here, exit 130 (143): run
back again to resume the wait, or cocoonbox offload abandon. A box CLI
that will not answer (its BACK turn failed, it waits at a dialog, its
sign-in screen or for the network, or it exited) ends the wait within
seconds, exit 1, naming what it said and how to see it
(cocoonbox rsh -t BOX tmux attach -t cb-off-<K>-<kind>).

Exit status: 0 done; 1 failed (nothing changed here, unless the message
says what did and how to undo it); 3 refused; 128+N stopped by signal N
while waiting.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return offloadExit(s, runBack(env, s, verbose)) },
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print each step and each call to the box with its time on stderr")
	return cmd
}

func runBack(env Env, s Streams, verbose bool) error {
	oe, err := connect(env)
	if err != nil {
		return err
	}
	defer oe.client.Close()
	ctx, stop, sigCode := signalExitContext()
	defer stop()
	client, logf := timed(oe.client, s, verbose)
	b := &offload.Backer{Laptop: oe.laptop(env, s, client, logf)}
	res, err := b.Run(ctx)
	if res != nil && res.Merge != nil {
		printBack(s, res)
	}
	return stoppedExit(err, sigCode())
}

// stoppedExit gives a wait or a step that a signal stopped the status
// 128+N.
func stoppedExit(err error, code int) error {
	var oe *offload.Error
	if code != 0 && errors.As(err, &oe) && (errors.Is(oe.Err, offload.ErrWaitStopped) || errors.Is(oe.Err, offload.ErrInterrupted)) {
		oe.Code = code
	}
	return err
}

// printBack prints the box agent's hand-over on stdout and what back did
// on stderr, the box's text made printable.
func printBack(s Streams, res *offload.BackResult) {
	if res.Resent {
		fmt.Fprintln(s.Err, "cocoonbox: BACK drew no answer for 60 s and was sent again with --interrupt")
	}
	fmt.Fprint(s.Out, printable.Text(strings.TrimRight(res.Body, "\n"))+"\n")
	m := res.Merge
	box := printable.Text(res.Record.BoxName)
	switch m.Outcome {
	case offload.FastForward:
		fmt.Fprintf(s.Err, "cocoonbox: back from %s: fast-forward%s\n", box, movedTo(m))
	case offload.Merged:
		fmt.Fprintf(s.Err, "cocoonbox: back from %s: merged, uncommitted, beside your changes%s\n", box, movedTo(m))
	case offload.Branched:
		fmt.Fprintf(s.Err, "cocoonbox: back from %s: on branch %s; your work tree is untouched (%s)\n", box, m.Branch, printable.Text(m.Reason))
		fmt.Fprintf(s.Err, "merge it when ready: git merge %s\n", m.Branch)
	case offload.UpToDate:
		fmt.Fprintf(s.Err, "cocoonbox: back from %s: already up to date\n", box)
	}
}

func movedTo(m *offload.MergeResult) string {
	if m.Head == "" {
		return ""
	}
	s := "; the branch is at the box's " + m.Head[:min(len(m.Head), 12)]
	if m.MergeDone {
		s += ", which commits the merge that was in progress here"
	}
	return s
}
