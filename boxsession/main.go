package boxsession

import (
	"fmt"
	"io"
	"os"
	"time"
)

// Exit statuses of Main, as cocoonbox-agent's.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// mainUsage is cocoonbox-session's --help.
const mainUsage = `usage: cocoonbox-session open ID WINDOW -- LINE
       cocoonbox-session attach ID

The box half of sessions that outlive their Exec stream, as
cocoonbox-agent session open|attach, in a binary that starts in a few
milliseconds (see docs/cocoonbox-agent.md "session").
`

// Main is cocoonbox-session, the lean entry point of the box half
// (docs/cocoonbox-agent.md "session"): args without the program name,
// stdin and stdout the Exec's streams; its own executable starts the
// holder. It returns the exit status: 0 when the
// session ended or moved, 1 with one line on stderr when the holder
// cannot be reached, 2 for usage.
//
// It is cocoonbox-agent's `session` verbs without the rest of the agent:
// every resumable command starts one, and the agent's package
// initialisation alone takes longer than the command's own start.
func Main(args []string, getenv func(string) string, stdin, stdout *os.File, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "cocoonbox-session: "+format+"\n", a...)
		return code
	}
	if len(args) == 0 {
		return fail(exitUsage, "give a verb: open or attach; see: cocoonbox-session --help")
	}
	self, err := os.Executable()
	if err != nil {
		self = "cocoonbox-session"
	}
	dir := Dir(getenv)
	holderArgs := []string{"holder"}
	switch verb, rest := args[0], args[1:]; verb {
	case "-h", "--help", "help":
		io.WriteString(stderr, mainUsage)
		return exitOK
	case "open":
		if len(rest) == 4 && rest[2] == "--" {
			rest = append(rest[:2], rest[3])
		}
		if len(rest) != 3 {
			return fail(exitUsage, "open takes ID WINDOW -- LINE; see: cocoonbox-session --help")
		}
		window, perr := time.ParseDuration(rest[1])
		if perr != nil || window <= 0 {
			return fail(exitUsage, "bad window %s: want a duration such as 5m", rest[1])
		}
		err = Open(dir, self, holderArgs, rest[0], window, rest[2], stdin, stdout)
	case "attach":
		if len(rest) != 1 {
			return fail(exitUsage, "attach takes ID; see: cocoonbox-session --help")
		}
		err = Attach(dir, self, holderArgs, rest[0], stdin, stdout)
	case "holder":
		err = Run(dir, nil)
	default:
		return fail(exitUsage, "unknown verb %q: want open or attach; see: cocoonbox-session --help", verb)
	}
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	return exitOK
}
