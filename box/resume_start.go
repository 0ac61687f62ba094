package box

import (
	"encoding/json"

	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// openLine is the box's command line that opens the session without a
// terminal: its shell hands the Exec's streams to the holder itself
// where one serves, so no process of ours starts in between
// (sessionwire.ShellOpen), else it runs the attacher, `cocoonbox-session
// open`. A request too long for one write into the holder's FIFO, and
// Resume.Agent, take the attacher's way only.
func (s *rsession) openLine() string {
	args := "open " + s.id + " " + s.r.Window.String() + " -- " + shellquote.Quote(s.cmd.Line)
	if s.r.Agent != "" {
		return s.agentLine(args)
	}
	req, err := json.Marshal(sessionwire.ShellRequest{Op: "open", ID: s.id, Window: int64(s.r.Window), Line: s.cmd.Line})
	if err != nil || len(req) > sessionwire.MaxShellRequest {
		return s.agentLine(args)
	}
	return "set -- " + args + "; " + sessionwire.ShellOpen(shellquote.Quote(string(req)))
}
