package boxsession

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/version"
)

// Exit statuses of Main, as cocoonbox-agent's.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// Program is how Main names itself and starts the holder: Name is the
// program as the user calls it ("cocoonbox-session", "cocoonbox-agent
// session"), for messages; HolderArgs the arguments after the executable
// that run the holder (["holder"], ["session", "holder"]).
type Program struct {
	Name       string
	HolderArgs []string
}

// Main runs one verb of the box half of sessions (docs/cocoonbox-agent.md
// "session"): args are the verb and its arguments, stdin and stdout the
// Exec's streams (handed to the holder when they are files); this
// process's executable starts the holder. It is the one parser of
// `cocoonbox-session` and `cocoonbox-agent session`. It returns the exit
// status: 0 when the session ended or moved, 1 with one line on stderr
// when the holder cannot be reached, 2 for usage.
func Main(p Program, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "%s: %s\n", p.Name, fmt.Sprintf(format, a...))
		return code
	}
	help := "see: " + p.Name + " --help"
	if len(args) == 0 {
		return fail(exitUsage, "give a verb: open, attach or list; %s", help)
	}
	self, err := os.Executable()
	if err != nil {
		self = "cocoonbox-session"
	}
	dir := Dir(getenv)
	verb := args[0]
	fs := flag.NewFlagSet(p.Name+" "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ttySpec := fs.String("tty", "", "")
	owner := fs.String("owner", "", "")
	take := fs.Bool("take", false, "")
	switch verb {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, HelpPage(p.Name).Help())
		return exitOK
	case "--version":
		fmt.Fprintf(stdout, "%s version %s\n", p.Name, version.String())
		return exitOK
	case "open", "attach", "list", "holder":
	default:
		return fail(exitUsage, "unknown verb %q: want open, attach or list; %s", verb, help)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return fail(exitUsage, "%s: %v; %s", verb, err, help)
	}
	rest := fs.Args()
	if verb != "open" && *ttySpec != "" || verb != "attach" && (*owner != "" || *take) {
		return fail(exitUsage, "%s takes no such option; %s", verb, help)
	}
	switch verb {
	case "open":
		if len(rest) == 4 && rest[2] == "--" {
			rest = append(rest[:2], rest[3])
		}
		if len(rest) != 3 {
			return fail(exitUsage, "open takes ID WINDOW -- LINE; %s", help)
		}
		window, perr := time.ParseDuration(rest[1])
		if perr != nil || window <= 0 {
			return fail(exitUsage, "bad window %s: want a duration such as 5m", rest[1])
		}
		if *ttySpec == "" {
			err = Open(dir, self, p.HolderArgs, rest[0], window, rest[2], stdin, stdout)
			break
		}
		tty, terr := ParseTTY(*ttySpec)
		if terr != nil {
			return fail(exitUsage, "%v", terr)
		}
		if v := getenv(TerminfoVar); v != "" {
			os.Unsetenv(TerminfoVar)
			if home, herr := os.UserHomeDir(); herr == nil {
				// As the local box does: a failure leaves the box's own
				// entries, if any.
				InstallTerminfo(home, tty.Term, v)
			}
		}
		err = OpenTTY(dir, self, p.HolderArgs, rest[0], window, tty, rest[2], stdin, stdout)
	case "attach":
		if len(rest) != 1 {
			return fail(exitUsage, "attach takes ID; %s", help)
		}
		err = AttachAs(dir, self, p.HolderArgs, rest[0], *owner, *take, stdin, stdout)
	case "list":
		if len(rest) != 0 {
			return fail(exitUsage, "list takes no arguments")
		}
		err = List(dir, stdout)
	case "holder":
		err = Run(dir, nil)
	}
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	return exitOK
}

// ParseTTY reads open's --tty TERM:ROWSxCOLS[:MODES] (MODES: RFC 4254
// section 8's encoded terminal modes, in hex); the error is one line
// naming the value.
func ParseTTY(spec string) (*TTY, error) {
	// Quoted and cut: the value is the client's, and the line goes back
	// to its terminal.
	shown := spec
	if len(shown) > 80 {
		shown = shown[:80] + "..."
	}
	bad := errors.New("bad --tty " + strconv.Quote(shown) + ": want TERM:ROWSxCOLS[:MODES], such as xterm-256color:24x80")
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 || !termName(parts[0]) {
		return nil, bad
	}
	var tty TTY
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
