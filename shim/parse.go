// Package shim gives the cocoonbox API the command line of OpenSSH's ssh(1):
// its option grammar, its host words, -G, its exec semantics, and its
// terminal mode with escapes, so that git, rsync, scp, sftp and every
// ssh-expecting tool can run cocoonbox-ssh in its place.
package shim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// TTYMode is what -T, -t, -tt or -o RequestTTY asked for (ssh_config(5)
// RequestTTY).
type TTYMode int

// The terminal modes.
const (
	TTYAuto   TTYMode = iota // neither: a terminal only for a login shell on a terminal
	TTYNever                 // -T, RequestTTY no
	TTYWanted                // -t, RequestTTY yes: a terminal when stdin is one
	TTYForced                // -tt, RequestTTY force: a terminal even when stdin is not one
)

var ttyNames = []string{TTYAuto: "auto", TTYNever: "false", TTYWanted: "true", TTYForced: "force"}

// SessionType is what the session runs (ssh_config(5) SessionType).
type SessionType int

// The session types.
const (
	SessionDefault   SessionType = iota // a command, or a login shell
	SessionNone                         // -N: nothing
	SessionSubsystem                    // -s: the subsystem named by the command words
)

var sessionNames = []string{SessionDefault: "default", SessionNone: "none", SessionSubsystem: "subsystem"}

// LogLevel is how much of our own the shim says on stderr (ssh_config(5)
// LogLevel). The zero value is INFO, ssh's default.
type LogLevel int

// The levels, in ssh's order: -q sets LogQuiet, each -v one more debug level.
const (
	LogQuiet LogLevel = iota - 3
	LogFatal
	LogError
	LogInfo
	LogVerbose
	LogDebug1
	LogDebug2
	LogDebug3
)

var logNames = map[string]LogLevel{
	"QUIET": LogQuiet, "SILENT": LogQuiet, "FATAL": LogFatal, "ERROR": LogError,
	"INFO": LogInfo, "VERBOSE": LogVerbose, "DEBUG": LogDebug1, "DEBUG1": LogDebug1,
	"DEBUG2": LogDebug2, "DEBUG3": LogDebug3,
}

// String is the level's name as ssh_config(5) LogLevel and -G spell it.
func (l LogLevel) String() string {
	switch l {
	case LogQuiet:
		return "QUIET"
	case LogFatal:
		return "FATAL"
	case LogError:
		return "ERROR"
	case LogInfo:
		return "INFO"
	case LogVerbose:
		return "VERBOSE"
	case LogDebug1:
		return "DEBUG1"
	case LogDebug2:
		return "DEBUG2"
	}
	return "DEBUG3"
}

// EscapeNone is Options.EscapeChar for -e none: no escapes.
const EscapeNone = -1

// Setting is one ssh_config keyword and its value, as -G prints it.
type Setting struct {
	Key   string // lower case, as ssh -G prints it
	Value string
}

// Options is a parsed ssh command line. Fields that ssh takes from its
// first source (-o options, -l, -p, the host word) keep the first value, as
// ssh_config(5) says; -t, -T, -N, -s, -n, -q, -v and -e override.
type Options struct {
	// Host is the host part of the host word as given, such as
	// "main.cocoonbox"; -G prints it as "host".
	Host string
	// HostName is -o HostName, which names the box instead of Host; empty
	// when not given.
	HostName string
	// User is from -l, user@, ssh://user@ or -o User; empty when not given.
	// The box user is fixed, so it only shows in -G.
	User string
	// Port is from -p, ssh://host:port or -o Port, in decimal; empty when
	// not given. It only shows in -G.
	Port string
	// Command is the command words, joined with single spaces before they
	// run, as ssh does.
	Command []string
	// RemoteCommand is -o RemoteCommand; empty when not given or "none".
	RemoteCommand string
	// TTY is -T, -t, -tt or -o RequestTTY.
	TTY TTYMode
	// StdinNull is -n, -f or -o StdinNull=yes: stdin is /dev/null.
	StdinNull bool
	// ForkAfterAuthentication is -f or -o ForkAfterAuthentication: the run
	// goes to the background once its forwards listen and its command has
	// started (background.go).
	ForkAfterAuthentication bool
	// ResumeWindow is -o CocoonboxResumeWindow (ours): how long the box
	// keeps the command while the connection is lost, and how long the
	// client tries to come back (box.Resume.Window); 0 when not given.
	ResumeWindow time.Duration
	// Session is -N, -s or -o SessionType.
	Session SessionType
	// LogLevel is -q, -v or -o LogLevel; zero is INFO.
	LogLevel LogLevel
	// EscapeChar is the terminal escape byte from -e or -o EscapeChar, '~'
	// by default, or EscapeNone.
	EscapeChar int
	// SendEnv holds the -o SendEnv patterns (path.Match syntax, as ssh's);
	// matching local variables are sent.
	SendEnv []string
	// SetEnv holds the -o SetEnv NAME=VALUE entries, in order; a NAME's
	// first entry wins.
	SetEnv []string
	// Other holds every other accepted option that -G prints, with its
	// equivalent from a flag (-i FILE is identityfile FILE), in the order
	// first given. They change nothing for a box.
	Other []Setting
	// DumpConfig is -G: print the configuration and exit.
	DumpConfig bool
	// Version is -V: print the version and exit.
	Version bool
	// LogFile is -E: our own messages are appended there instead of stderr.
	LogFile string
	// Forwards are the -L, -D and -R forwards (and -o LocalForward,
	// DynamicForward, RemoteForward), in order; ActiveForwards says which
	// to set up.
	Forwards []Forward
	// StdioHost and StdioPort are -W's host:port, where stdin and stdout
	// are connected instead of a session; empty when not given.
	StdioHost string
	StdioPort int
	// ExitOnForwardFailure is -o ExitOnForwardFailure (and -W): a forward
	// that cannot listen ends the run with 255 before the command starts.
	ExitOnForwardFailure bool
	// GatewayPorts is -g or -o GatewayPorts: a forward with no bind
	// address listens on every address instead of loopback.
	GatewayPorts bool

	set        map[string]bool // keywords already set from a first source
	verbose    bool            // a -v has been seen
	ignoreUnkn []string        // -o IgnoreUnknown patterns
}

// UsageError is a command line ssh would refuse; ssh exits 255 for it.
type UsageError struct {
	Msg string
	// Synopsis is true when ssh would follow the message with its usage.
	Synopsis bool
}

// Error is the one-line message, without the program's name.
func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// Synopsis is the usage that follows an unknown option or a missing box,
// as ssh prints its own, for the program prog: its lines, with only the
// options the shim takes.
func Synopsis(prog string) []string {
	var flags []byte
	for i := 0; i < len(optionsNoArg); i++ {
		c := optionsNoArg[i]
		if _, refused := unsupportedFlags[c]; !refused && c != '2' {
			flags = append(flags, c)
		}
	}
	return []string{
		prog + " [-" + string(flags) + "] [-D [bind_address:]port] [-E log_file]",
		"[-e escape_char] [-L [bind_address:]port:host:hostport] [-l login_name]",
		"[-o option] [-p port] [-R [bind_address:]port:host:hostport] [-W host:port]",
		"[user@]BOX [command [argument ...]]",
	}
}

// optionsWithArg and optionsNoArg are the option letters of OpenSSH 9.2's
// getopt string, with and without an argument.
const (
	optionsWithArg = "BbcDEeFIiJLlmOoPpQRSWw"
	optionsNoArg   = "1246AaCfGgKkMNnqsTtVvXxYy"
)

// Parse parses ssh's command line, args without the program name. As ssh,
// it parses options up to the host word, then again after it up to the
// first command word, unless "--" came first.
func Parse(args []string) (*Options, error) {
	o := &Options{EscapeChar: '~', set: map[string]bool{}}
	rest, terminated, err := o.options(args)
	if err != nil {
		return nil, err
	}
	if o.Version {
		return o, nil
	}
	if len(rest) == 0 {
		return nil, &UsageError{Msg: "no box given", Synopsis: true}
	}
	if err := o.setHost(rest[0]); err != nil {
		return nil, err
	}
	rest = rest[1:]
	if !terminated {
		if rest, _, err = o.options(rest); err != nil {
			return nil, err
		}
		if o.Version {
			return o, nil
		}
	}
	o.Command = rest
	if o.RemoteCommand != "" && len(o.Command) > 0 {
		return nil, usagef("cannot execute command-line and remote command")
	}
	if o.ForkAfterAuthentication && len(o.Command) == 0 && o.RemoteCommand == "" && o.Session != SessionNone {
		// ssh.c's words; like ssh, -G says it too.
		return nil, usagef("Cannot fork into background without a command to execute.")
	}
	if o.Session == SessionSubsystem && len(o.Command) == 0 && o.RemoteCommand == "" {
		return nil, usagef("-s: no subsystem named; usage: cocoonbox-ssh -s BOX SUBSYSTEM")
	}
	if err := validName("box", o.Box()); err != nil {
		return nil, err
	}
	return o, nil
}

// options parses options the way OpenSSH's BSD getopt does, until the
// first word that is not one or "--"; it returns the words left and
// whether "--" ended the options. -V stops parsing at once, as ssh exits
// there.
func (o *Options) options(args []string) (rest []string, terminated bool, err error) {
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			return args[i+1:], true, nil
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		i++
		for j := 1; j < len(a); j++ {
			c := a[j]
			switch {
			case strings.IndexByte(optionsWithArg, c) >= 0:
				val := a[j+1:]
				if val == "" {
					if i >= len(args) {
						return nil, false, &UsageError{Msg: fmt.Sprintf("option requires an argument -- %c", c), Synopsis: true}
					}
					val = args[i]
					i++
				}
				if err := o.flagArg(c, val); err != nil {
					return nil, false, err
				}
				j = len(a)
			case strings.IndexByte(optionsNoArg, c) >= 0:
				if err := o.flag(c); err != nil {
					return nil, false, err
				}
				if o.Version {
					return nil, false, nil
				}
			default:
				return nil, false, &UsageError{Msg: "unknown option -- " + printable(string(c)), Synopsis: true}
			}
		}
	}
	return args[i:], false, nil
}

// unsupportedFlags are the options that would change what ssh does in ways
// a box cannot do yet.
var unsupportedFlags = map[byte]string{
	'1': "-1: SSH protocol v.1 is no longer supported",
	'J': "-J (jump host) is not supported: a box is reached through the cocoonbox API",
	'O': "-O (control a multiplexing master) is not supported; cocoonbox-ssh shares its connections by itself: COCOONBOX_CONTROL_PERSIST=no turns that off, cocoonbox logout stops the masters",
	'Q': "-Q (query ssh algorithms) is not supported: a box is reached through the cocoonbox API",
	'w': "-w (tunnel device forwarding) is not supported",
}

// keywordSwitches are the flags without a value that only set keywords,
// each to its value in order, as -o KEYWORD=VALUE would (ssh(1)).
var keywordSwitches = map[byte][][2]string{
	'4': {{"addressfamily", "inet"}},
	'6': {{"addressfamily", "inet6"}},
	'A': {{"forwardagent", "yes"}},
	'a': {{"forwardagent", "no"}},
	'C': {{"compression", "yes"}},
	'K': {{"gssapiauthentication", "yes"}, {"gssapidelegatecredentials", "yes"}},
	'k': {{"gssapidelegatecredentials", "no"}},
	'X': {{"forwardx11", "yes"}, {"forwardx11trusted", "no"}},
	'x': {{"forwardx11", "no"}},
	'Y': {{"forwardx11", "yes"}, {"forwardx11trusted", "yes"}},
}

func (o *Options) flag(c byte) error {
	if msg, ok := unsupportedFlags[c]; ok {
		return &UsageError{Msg: msg}
	}
	if kvs, ok := keywordSwitches[c]; ok {
		for _, kv := range kvs {
			o.other(kv[0], kv[1], true)
		}
		return nil
	}
	switch c {
	case 'f':
		// As ssh.c: -f also means -n, -o ForkAfterAuthentication does not.
		byFlag(o, "forkafterauthentication", &o.ForkAfterAuthentication, true)
		o.other("forkafterauthentication", "yes", true)
		byFlag(o, "stdinnull", &o.StdinNull, true)
	case 'G':
		o.DumpConfig = true
	case 'g':
		byFlag(o, "gatewayports", &o.GatewayPorts, true)
		o.other("gatewayports", "yes", true)
	case 'M':
		v := "yes"
		if o.otherValue("controlmaster") == "yes" {
			v = "ask"
		}
		o.other("controlmaster", v, true)
	case 'N':
		byFlag(o, "sessiontype", &o.Session, SessionNone)
	case 'n':
		byFlag(o, "stdinnull", &o.StdinNull, true)
	case 'q':
		byFlag(o, "loglevel", &o.LogLevel, LogQuiet)
	case 's':
		byFlag(o, "sessiontype", &o.Session, SessionSubsystem)
	case 'T':
		byFlag(o, "requesttty", &o.TTY, TTYNever)
	case 't':
		// As ssh.c: a second -t forces, a third does not.
		m := TTYWanted
		if o.TTY == TTYWanted {
			m = TTYForced
		}
		byFlag(o, "requesttty", &o.TTY, m)
	case 'V':
		o.Version = true
	case 'v':
		o.set["loglevel"] = true
		if !o.verbose {
			o.verbose = true
			o.LogLevel = LogDebug1
		} else if o.LogLevel < LogDebug3 {
			o.LogLevel++
		}
	}
	return nil
}

// keywordFlags are the flags that only give a keyword its value, as -o
// KEYWORD=VALUE would (ssh(1)).
var keywordFlags = map[byte]string{
	'B': "bindinterface", 'b': "bindaddress", 'c': "ciphers", 'I': "pkcs11provider",
	'i': "identityfile", 'm': "macs", 'P': "tag", 'S': "controlpath",
}

func (o *Options) flagArg(c byte, v string) error {
	if msg, ok := unsupportedFlags[c]; ok {
		return &UsageError{Msg: msg}
	}
	if err := checkValue(string(c), v); err != nil {
		return err
	}
	if k, ok := keywordFlags[c]; ok {
		// These print back through -G as an ssh_config line would read.
		v = strings.Trim(v, " \t")
		if v == "" || v[0] == '=' {
			return usagef("-%c: bad value %q", c, printable(v))
		}
		o.other(k, v, true)
		return nil
	}
	switch c {
	case 'D':
		return o.addForward(v, true)
	case 'E':
		o.LogFile = v
	case 'e':
		e, err := parseEscape(v)
		if err != nil {
			return err
		}
		byFlag(o, "escapechar", &o.EscapeChar, e)
	case 'F':
		// ssh_config files are not read: options come from the command line.
	case 'L':
		return o.addForward(v, false)
	case 'l':
		return o.setUser(v)
	case 'o':
		return o.configLine(v)
	case 'p':
		return o.setPort(v)
	case 'R':
		return o.addRemoteForward(v)
	case 'W':
		return o.setStdioForward(v)
	}
	return nil
}

// byFlag sets *field, the option of keyword k, to v as a flag does: a
// flag's value replaces an earlier one, and no -o k=... after it changes
// it (first).
func byFlag[T any](o *Options, k string, field *T, v T) {
	*field = v
	o.set[k] = true
}

// byConfig sets *field, the option of keyword k, to v as -o k=v does: the
// first value given, by -o or a flag, wins (first).
func byConfig[T any](o *Options, k string, field *T, v T) {
	if o.first(k) {
		*field = v
	}
}

// oneOf sets, as byConfig, *field to the value names gives word, and is
// bad() when it gives none.
func oneOf[T any](o *Options, k string, field *T, names map[string]T, word string, bad func() error) error {
	v, ok := names[word]
	if !ok {
		return bad()
	}
	byConfig(o, k, field, v)
	return nil
}

// first reports whether keyword k has not been set yet, and marks it set.
func (o *Options) first(k string) bool {
	if o.set[k] {
		return false
	}
	o.set[k] = true
	return true
}

func (o *Options) setUser(v string) error {
	if err := validName("user", v); err != nil {
		return err
	}
	if o.first("user") {
		o.User = v
	}
	return nil
}

func (o *Options) setPort(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 65535 {
		return usagef("bad port %q", v)
	}
	if o.first("port") {
		o.Port = strconv.Itoa(n)
	}
	return nil
}

// other records an ignored option for -G: a flag's equivalent replaces an
// earlier value (overwrite), an -o option keeps the first, and the keywords
// ssh keeps a list of add to it.
func (o *Options) other(k, v string, overwrite bool) {
	if listKeywords[k] {
		o.Other = append(o.Other, Setting{k, v})
		return
	}
	for i := range o.Other {
		if o.Other[i].Key == k {
			if overwrite {
				o.Other[i].Value = v
			}
			return
		}
	}
	o.Other = append(o.Other, Setting{k, v})
}

func (o *Options) otherValue(k string) string {
	for _, s := range o.Other {
		if s.Key == k {
			return s.Value
		}
	}
	return ""
}

// setHost takes [user@]HOST or ssh://[user@]HOST[:PORT][/].
func (o *Options) setHost(h string) error {
	word := h
	port := ""
	if rest, ok := strings.CutPrefix(h, "ssh://"); ok {
		h = strings.TrimSuffix(rest, "/")
		if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "@") {
			h, port = h[:i], h[i+1:]
		}
	}
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		if i == 0 {
			return usagef("bad host word %q: want [user@]BOX", printable(word))
		}
		if err := o.setUser(h[:i]); err != nil {
			return err
		}
		h = h[i+1:]
	}
	if err := validName("box", h); err != nil {
		return err
	}
	if port != "" {
		if err := o.setPort(port); err != nil {
			return err
		}
	}
	o.Host = h
	return nil
}

// Box is the box to run in: HostName if given, else Host, lower-cased
// as OpenSSH does, without a ".cocoonbox" suffix (for ssh_config "Host
// *.cocoonbox" blocks).
func (o *Options) Box() string {
	h := o.Host
	if o.HostName != "" {
		h = o.HostName
	}
	// As OpenSSH dials the host name: lower-cased, ASCII only (ssh -G
	// MAIN says hostname main).
	h = strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, h)
	if b := strings.TrimSuffix(h, ".cocoonbox"); b != "" {
		return b
	}
	return h
}

// validName refuses a user or box name that is empty or holds characters
// no host or user name has: white space, control characters, quotes, backslash,
// '/', ':', '=' or '@' (and a leading '-' for a box, which a shell would take
// for an option).
func validName(what, s string) error {
	bad := s == "" || strings.ContainsFunc(s, func(r rune) bool {
		return r <= ' ' || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune(`"'\/:=@`, r) && !(what == "user" && r == '@')
	}) || what == "box" && s[0] == '-'
	if bad {
		return usagef("bad %s name %q", what, printable(s))
	}
	return nil
}

// parseEscape reads -e's argument: a single byte, ^X for a control
// character, or "none".
func parseEscape(v string) (int, error) {
	switch {
	case v == "none":
		return EscapeNone, nil
	case len(v) == 2 && v[0] == '^' && v[1] >= 64 && v[1] < 128:
		return int(v[1] & 31), nil
	case len(v) == 1 && v[0] > ' ' && v[0] != 0x7f:
		return int(v[0]), nil
	}
	return 0, usagef("bad escape character %q: want one character, ^X or none", printable(v))
}

func escapeName(e int) string {
	switch {
	case e == EscapeNone:
		return "none"
	case e < 32:
		return string([]byte{'^', byte(e | 64)})
	}
	return string([]byte{byte(e)})
}

// Line is the remote command: RemoteCommand, or the words joined with single
// spaces, which the box user's shell then parses, as ssh(1) does.
func (o *Options) Line() string {
	if o.RemoteCommand != "" {
		return o.RemoteCommand
	}
	return strings.Join(o.Command, " ")
}

// printable quotes control characters in s for a message.
func printable(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
