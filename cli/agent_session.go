package cli

import (
	"encoding/hex"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/boxsession"
)

// newAgentSession is `cocoonbox-agent session open|attach|holder`: the box
// half of sessions that outlive their Exec stream (docs/cocoonbox-agent.md).
func newAgentSession(a *agentRun) *cobra.Command {
	dir := func() string { return boxsession.Dir(a.env.Getenv) }
	self, _ := os.Executable()
	holderArgs := []string{"session", "holder"}
	c := &cobra.Command{
		Use:   "session",
		Short: "Run a command that outlives its stream (open), take it back (attach)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.fail(usage("give a verb: open or attach; see: cocoonbox-agent session --help"))
		},
	}
	var ttySpec, owner string
	var take bool
	open := streamVerb(a, "open ID WINDOW -- LINE", "Run LINE (empty: a login shell) as session ID, kept WINDOW while no client is attached; stdin and stdout carry its frames",
		func(args []string) (int, error) {
			if len(args) != 3 {
				return ExitUsage, errors.New("open takes ID WINDOW LINE; see: cocoonbox-agent session --help")
			}
			window, err := time.ParseDuration(args[1])
			if err != nil || window <= 0 {
				return ExitUsage, errors.New("bad window " + args[1] + ": want a duration such as 5m")
			}
			if ttySpec != "" {
				tty, err := parseSessionTTY(ttySpec)
				if err != nil {
					return ExitUsage, err
				}
				if v := os.Getenv(boxsession.TerminfoVar); v != "" {
					os.Unsetenv(boxsession.TerminfoVar)
					if home, err := os.UserHomeDir(); err == nil {
						// As the local box does: a failure leaves the
						// box's own entries, if any.
						boxsession.InstallTerminfo(home, tty.Term, v)
					}
				}
				err = boxsession.OpenTTY(dir(), self, holderArgs, args[0], window, tty, args[2], a.s.In, a.s.Out)
				if err != nil {
					return ExitFailure, err
				}
				return ExitOK, nil
			}
			if err := boxsession.Open(dir(), self, holderArgs, args[0], window, args[2], a.s.In, a.s.Out); err != nil {
				return ExitFailure, err
			}
			return ExitOK, nil
		})
	open.Flags().StringVar(&ttySpec, "tty", "", "run LINE on a terminal the box keeps: TERM:ROWSxCOLS[:MODES], MODES in hex (RFC 4254 section 8)")
	attach := streamVerb(a, "attach ID", "Take session ID back: stdin and stdout carry its frames",
		func(args []string) (int, error) {
			if len(args) != 1 {
				return ExitUsage, errors.New("attach takes ID; see: cocoonbox-agent session --help")
			}
			if err := boxsession.AttachAs(dir(), self, holderArgs, args[0], owner, take, a.s.In, a.s.Out); err != nil {
				return ExitFailure, err
			}
			return ExitOK, nil
		})
	attach.Flags().StringVar(&owner, "owner", "", "the attaching client's token: refused when another client took the session")
	attach.Flags().BoolVar(&take, "take", false, "take the session from its client (with --owner): that client's attaches are refused")
	list := streamVerb(a, "list", "List the box user's sessions, one JSON object a line",
		func(args []string) (int, error) {
			if len(args) != 0 {
				return ExitUsage, errors.New("list takes no arguments")
			}
			if err := boxsession.List(dir(), a.s.Out); err != nil {
				return ExitFailure, err
			}
			return ExitOK, nil
		})
	holder := streamVerb(a, "holder", "Serve the box user's sessions until none is left (started by open)",
		func(args []string) (int, error) {
			if err := boxsession.Run(dir(), nil); err != nil {
				return ExitFailure, err
			}
			return ExitOK, nil
		})
	holder.Hidden = true
	c.AddCommand(open, attach, list, holder)
	return c
}

var sessionTermRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$`)

// parseSessionTTY reads open's --tty TERM:ROWSxCOLS[:MODES].
func parseSessionTTY(spec string) (*boxsession.TTY, error) {
	bad := errors.New("bad --tty " + spec + ": want TERM:ROWSxCOLS[:MODES], such as xterm-256color:24x80")
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 || !sessionTermRE.MatchString(parts[0]) {
		return nil, bad
	}
	var tty boxsession.TTY
	tty.Term = parts[0]
	r, c, ok := strings.Cut(parts[1], "x")
	rows, err1 := strconv.ParseUint(r, 10, 16)
	cols, err2 := strconv.ParseUint(c, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return nil, bad
	}
	tty.Rows, tty.Cols = uint32(rows), uint32(cols)
	if len(parts) == 3 {
		m, err := hex.DecodeString(parts[2])
		if err != nil {
			return nil, bad
		}
		tty.Modes = m
	}
	return &tty, nil
}
