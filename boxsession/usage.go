package boxsession

import (
	"strings"

	help "github.com/cocoonbox/cocoonbox/internal/usage"
)

// HelpPage is the --help text and man page of prog, the program as the
// user calls it ("cocoonbox-session", "cocoonbox-agent session"); its
// Name, which the text's last line gives to man, is prog with a dash for
// the space, as the man pages name a subcommand's.
func HelpPage(prog string) help.Page {
	return help.Page{
		Name:  strings.ReplaceAll(prog, " ", "-"),
		Short: "the box half of commands that outlive their connection (resumable sessions)",
		Synopsis: []string{
			prog + " open [--tty TERM:ROWSxCOLS[:MODES]] ID WINDOW -- LINE",
			prog + " attach [--owner TOKEN [--take]] ID",
			prog + " list",
		},
		Description: []string{
			"The cocoonbox client runs it in the box for a command that outlives a lost connection " +
				"(a command on a terminal unless COCOONBOX_RESUME=off, every command with COCOONBOX_RESUME=on; rsh --list and --attach); it is not run by hand. " +
				"open runs LINE (by $SHELL -c; empty: a login shell) as session ID, kept WINDOW (such as 5m) " +
				"after its client goes, and carries the session's frames on its stdin and stdout; " +
				"attach takes session ID back; list prints the box user's sessions.",
			"The commands run under a holder process of the box user's, one per box, started by the first open, " +
				"which keeps each session's unacknowledged output and exits a minute after its last session. " +
				"Its socket is in $COCOONBOX_RUN_DIR/cocoonbox-sessions, else under $XDG_RUNTIME_DIR.",
		},
		Exit:    "0 when the session ended or moved; 1, after one line on stderr, when the holder cannot be reached; 2 for usage.",
		SeeAlso: []string{"cocoonbox(1)", "cocoonbox-rsh(1)", "cocoonbox-agent(1)"},
	}
}
