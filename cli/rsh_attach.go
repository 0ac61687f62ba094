package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	"github.com/cocoonbox/cocoonbox/shim"
)

// defaultSessionBox is the box of `rsh --attach` and `rsh --list`
// without one.
const defaultSessionBox = "main"

// rshSessions is `cocoonbox rsh --attach [BOX [ID]]`, which takes a
// detached terminal session back (docs/cocoonbox.md "Terminals you can
// take back"), and `cocoonbox rsh --list [BOX]`, which lists the box's
// terminal sessions; 255 and one line for a failure, as rsh's.
func rshSessions(env Env, s Streams, args []string) int {
	const prog = "cocoonbox rsh"
	fail := func(err error) int {
		fmt.Fprintf(s.Err, "%s: %s\n", prog, printable.Line(err.Error(), maxLine))
		return shim.ExitFailure
	}
	attach := args[0] == "--attach"
	args = args[1:]
	// --list --json: one JSON object a line, as every list of ours.
	asJSON := false
	if !attach {
		if i := slices.Index(args, "--json"); i >= 0 {
			asJSON, args = true, slices.Delete(slices.Clone(args), i, i+1)
		}
	}
	if max := map[bool]int{true: 2, false: 1}[attach]; len(args) > max || len(args) > 0 && strings.HasPrefix(args[0], "-") {
		return fail(errors.New("usage: cocoonbox rsh --attach [BOX [ID]] | --list [--json] [BOX]"))
	}
	boxName, id := defaultSessionBox, ""
	if len(args) > 0 {
		boxName = args[0]
	}
	if len(args) > 1 {
		id = args[1]
		if !box.SessionIDRE().MatchString(id) {
			return fail(fmt.Errorf("bad session id %s: want the hex id cocoonbox rsh --list %s shows", id, boxName))
		}
	}
	c, err := env.dial("")
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	all, err := c.Sessions(context.Background(), boxName)
	if err != nil {
		return fail(err)
	}
	var terms []sessionwire.Info
	for _, i := range all {
		if i.Term != "" && !i.Exited {
			terms = append(terms, i)
		}
	}
	if !attach && asJSON {
		for _, i := range terms {
			o := map[string]any{"id": i.ID, "state": "attached", "command": i.Line}
			if !i.Attached {
				o["state"], o["detached_at_ms"] = "detached", i.DetachedMs
			}
			if err := writeJSON(s.Out, o); err != nil {
				return fail(err)
			}
		}
		return 0
	}
	if !attach {
		listSessions(s.Out, terms)
		if len(terms) == 0 {
			// The header alone on stdout, as an empty list of ours is;
			// the word for a reader on stderr.
			fmt.Fprintf(s.Err, "no terminal session in box %s\n", boxName)
		}
		return 0
	}
	var detached []sessionwire.Info
	for _, i := range terms {
		// An id of another form is the box's invention: it would go on
		// the agent's command line.
		if !i.Attached && box.SessionIDRE().MatchString(i.ID) && (id == "" || strings.HasPrefix(i.ID, id)) {
			detached = append(detached, i)
		}
	}
	// Those attached to another client are not taken (docs/cocoonbox.md
	// "Terminals you can take back"); a reader who named one, or has
	// only such, is told so rather than that there is none.
	var attached []sessionwire.Info
	for _, i := range terms {
		if i.Attached && box.SessionIDRE().MatchString(i.ID) && (id == "" || strings.HasPrefix(i.ID, id)) {
			attached = append(attached, i)
		}
	}
	const detach = "close that client's terminal to detach it (a client cut off is detached once the box notices), then attach again"
	switch {
	case len(detached) == 0 && id != "" && len(attached) == 1:
		return fail(fmt.Errorf("terminal session %s in %s is attached to another client; %s", printable.Line(attached[0].ID, 64), boxName, detach))
	case len(detached) == 0 && id != "":
		return fail(fmt.Errorf("no detached terminal session %s in %s; list them with: cocoonbox rsh --list %s", id, boxName, boxName))
	case len(detached) == 0 && len(attached) > 0:
		return fail(fmt.Errorf("no detached terminal session in %s: %d attached to another client; %s (cocoonbox rsh --list %s)", boxName, len(attached), detach, boxName))
	case len(detached) == 0:
		return fail(fmt.Errorf("no detached terminal session in %s; list them with: cocoonbox rsh --list %s", boxName, boxName))
	case len(detached) > 1:
		listSessions(s.Err, detached)
		return fail(fmt.Errorf("%d detached terminal sessions in %s: name one with: cocoonbox rsh --attach %s ID", len(detached), boxName, boxName))
	}
	fd := shim.TerminalFd(s.In)
	if fd < 0 {
		return fail(errors.New("--attach needs a terminal: stdin is not one"))
	}
	t := &shim.Terminal{Fd: fd, Getenv: env.Getenv, Escape: '~', Msgs: s.Err}
	cmd := &box.Command{Box: boxName, Attach: detached[0].ID, Stdin: s.In, Stdout: s.Out, Stderr: s.Err}
	end, st, err := t.Run(c, cmd)
	switch {
	case end.Signal != nil:
		return shim.ExitFailure
	case end.Disconnected:
	case err != nil:
		return fail(err)
	case st.Error != "":
		return fail(fmt.Errorf("box %s: %s", boxName, st.Error))
	case st.Signal != "":
		return shim.ExitFailure
	}
	fmt.Fprintf(s.Err, "Connection to %s closed.\r\n", boxName)
	if end.Disconnected {
		return shim.ExitFailure
	}
	return st.Code
}

// listSessions writes sessions as a table: id, state, command; with
// none, the header alone.
func listSessions(w io.Writer, sessions []sessionwire.Info) {
	fmt.Fprintf(w, "%-32s  %-22s  %s\n", "ID", "STATE", "COMMAND")
	now := time.Now()
	for _, i := range sessions {
		state := "attached"
		if !i.Attached {
			state = "detached " + ago(now.Sub(time.UnixMilli(i.DetachedMs))) + " ago"
		}
		line := i.Line
		if line == "" {
			line = "(login shell)"
		}
		fmt.Fprintf(w, "%-32s  %-22s  %s\n", printable.Line(i.ID, 64), state, printable.Line(line, 60))
	}
}

// ago is d rounded for a listing: seconds, minutes or hours.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	}
	return fmt.Sprintf("%d h", int(d.Hours()))
}
