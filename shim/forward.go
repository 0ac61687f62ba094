package shim

import (
	"fmt"
	"strconv"
	"strings"
)

// Forward is one -L, -D or -R (or -o LocalForward, DynamicForward,
// RemoteForward), as OpenSSH's parse_forward reads it.
type Forward struct {
	// Remote is -R: the listening end is in the box, the connecting end
	// here (the other way round from -L and -D).
	Remote bool
	// Dynamic is -D, or -R with no connecting end: a SOCKS server on the
	// end that is not listening, each connection going where its request
	// asks.
	Dynamic bool
	// ListenHost is the bind address as given: "" when none was given
	// (loopback, or every address with GatewayPorts), "*" for every
	// address, "localhost", or an address. Explicit is whether one was given.
	ListenHost string
	Explicit   bool
	// ListenPort is the listening TCP port, 1 to 65535 (-R: 0 asks the
	// box for one), or 0 when ListenPath names a unix socket instead.
	ListenPort int
	ListenPath string
	// ConnectHost and ConnectPort are where a connection goes: for -L as
	// seen from inside the box, for -R from here; empty when dynamic, and
	// when ConnectPath is set.
	ConnectHost string
	ConnectPort int
	// ConnectPath is the unix socket connected to instead (-L
	// PORT:/path/in/box.sock, -R PORT:/local.sock); relative paths are
	// from the workspace in the box, from the working directory here.
	ConnectPath string
}

// fwdField is one colon-separated field of a forwarding spec.
type fwdField struct {
	arg    string
	isPath bool
}

// splitForward splits spec as OpenSSH's parse_fwd_field does: at colons,
// a field in [brackets] taken literally, a backslash escaping the next
// byte; a field holding '/' is a unix socket path. At most 4 fields; nil
// on a malformed spec.
func splitForward(spec string) []fwdField {
	s := strings.TrimLeft(spec, " \t")
	var fields []fwdField
	for s != "" && len(fields) < 4 {
		var f fwdField
		if s[0] == '[' {
			end := strings.IndexByte(s, ']')
			if end < 0 || end+1 < len(s) && s[end+1] != ':' {
				return nil
			}
			f.arg, f.isPath = s[1:end], strings.Contains(s[1:end], "/")
			s = s[min(end+2, len(s)):]
			fields = append(fields, f)
			continue
		}
		var b strings.Builder
		i := 0
		for ; i < len(s) && s[i] != ':'; i++ {
			switch s[i] {
			case '\\':
				i++
				if i == len(s) {
					return nil
				}
			case '/':
				f.isPath = true
			}
			b.WriteByte(s[i])
		}
		f.arg = b.String()
		fields = append(fields, f)
		if i == len(s) {
			s = ""
			break
		}
		// A trailing colon leaves an empty rest, which OpenSSH ignores.
		s = s[i+1:]
	}
	if s != "" {
		return nil
	}
	return fields
}

// parsePort is OpenSSH's a2port: 1 to 65535, else 0.
func parsePort(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 65535 || strings.TrimLeft(s, "0123456789") != "" {
		return 0
	}
	return n
}

// parseRemoteForward reads a -R spec as ssh.c does: a forward with a
// connecting end, else a dynamic one.
//
//	-R [bind:]port:host:hostport   -R remote_socket:host:hostport
//	-R [bind:]port:local_socket    -R remote_socket:local_socket
//	-R [bind:]port                 -R remote_socket
func parseRemoteForward(spec string) (Forward, error) {
	f, err := parseForward(spec, false, true)
	if err != nil {
		if f, err = parseForward(spec, true, true); err != nil {
			return f, usagef("Bad remote forwarding specification '%s'", printable(spec))
		}
	}
	return f, nil
}

// parseForward reads a -L (dynamic false) or -D (dynamic true) spec, or
// with remote one of -R's two kinds:
//
//	-L [bind:]port:host:hostport   -L local_socket:host:hostport
//	-L [bind:]port:remote_socket   -L local_socket:remote_socket
//	-D [bind:]port                 -D local_socket
func parseForward(spec string, dynamic, remote bool) (Forward, error) {
	name := "local"
	if dynamic {
		name = "dynamic"
	}
	bad := usagef("Bad %s forwarding specification '%s'", name, printable(spec))
	fs := splitForward(spec)
	f := Forward{Dynamic: dynamic, Remote: remote}
	listen := func(i int) error {
		if fs[i].isPath {
			f.ListenPath = fs[i].arg
			return nil
		}
		f.ListenPort = parsePort(fs[i].arg)
		// A remote forward may ask for port 0 (a2port's "0", "00", ...).
		if f.ListenPort == 0 && !(remote && fs[i].arg != "" && strings.Trim(fs[i].arg, "0") == "") {
			return bad
		}
		return nil
	}
	if dynamic {
		switch len(fs) {
		case 1:
			return f, listen(0)
		case 2:
			f.ListenHost, f.Explicit = fs[0].arg, true
			if fs[1].isPath {
				return f, bad
			}
			return f, listen(1)
		}
		return f, bad
	}
	var connect []fwdField
	switch len(fs) {
	case 2:
		if !fs[1].isPath {
			return f, bad
		}
		f.ConnectPath = fs[1].arg
		return f, listen(0)
	case 3:
		if fs[2].isPath {
			f.ListenHost, f.Explicit, f.ConnectPath = fs[0].arg, true, fs[2].arg
			if fs[1].isPath {
				return f, bad
			}
			return f, listen(1)
		}
		connect = fs[1:]
		if err := listen(0); err != nil {
			return f, err
		}
	case 4:
		f.ListenHost, f.Explicit = fs[0].arg, true
		connect = fs[2:]
		if fs[1].isPath {
			return f, bad
		}
		if err := listen(1); err != nil {
			return f, err
		}
	default:
		return f, bad
	}
	if connect[1].isPath {
		return f, bad
	}
	f.ConnectHost, f.ConnectPort = connect[0].arg, parsePort(connect[1].arg)
	if f.ConnectPort == 0 || len(f.ConnectHost) >= 1025 {
		return f, bad
	}
	return f, nil
}

// parseStdioForward reads -W host:port.
func parseStdioForward(spec string) (host string, port int, err error) {
	fs := splitForward(spec)
	if len(fs) != 2 || fs[0].isPath || fs[1].isPath || fs[0].arg == "" || parsePort(fs[1].arg) == 0 {
		if len(fs) == 1 && fs[0].isPath {
			return "", 0, usagef("-W %s: stdio forwarding to a unix socket is not supported yet (-L PORT:/path/to.sock is)", printable(spec))
		}
		return "", 0, usagef("Bad stdio forwarding specification '%s'", printable(spec))
	}
	return fs[0].arg, parsePort(fs[1].arg), nil
}

// connectString is where a forward connects, for messages.
func (f Forward) connectString() string {
	switch {
	case f.ConnectPath != "":
		return f.ConnectPath
	case f.Dynamic:
		return "socks:0"
	}
	return fmt.Sprintf("%s:%d", f.ConnectHost, f.ConnectPort)
}

// listenString is the listening end as ssh -G prints it.
func (f Forward) listenString() string {
	switch {
	case f.ListenPath != "":
		return f.ListenPath
	case !f.Explicit:
		return strconv.Itoa(f.ListenPort)
	}
	return "[" + f.ListenHost + "]:" + strconv.Itoa(f.ListenPort)
}

// String is the forward as ssh -G prints it: "localforward LISTEN
// [host]:port", "dynamicforward LISTEN" or "remoteforward LISTEN
// [host]:port" (a dynamic one's [socks]:0), each word quoted only if it
// must be to read back as one.
func (f Forward) String() string {
	key := "localforward "
	switch {
	case f.Remote:
		key = "remoteforward "
	case f.Dynamic:
		return "dynamicforward " + quoteWord(f.listenString())
	}
	switch {
	case f.ConnectPath != "":
		return key + quoteWord(f.listenString()) + " " + quoteWord(f.ConnectPath)
	case f.Dynamic:
		return key + quoteWord(f.listenString()) + " [socks]:0"
	}
	return key + quoteWord(f.listenString()) + " " + quoteWord(fmt.Sprintf("[%s]:%d", f.ConnectHost, f.ConnectPort))
}

// addForward records a -L or -D; an -o LocalForward's "LISTEN CONNECT"
// comes here joined with a colon, as readconf.c does.
func (o *Options) addForward(spec string, dynamic bool) error {
	f, err := parseForward(spec, dynamic, false)
	if err != nil {
		return err
	}
	o.Forwards = append(o.Forwards, f)
	return nil
}

// addRemoteForward records a -R; -o RemoteForward's "LISTEN CONNECT"
// comes here joined with a colon, its "LISTEN" alone as it is.
func (o *Options) addRemoteForward(spec string) error {
	f, err := parseRemoteForward(spec)
	if err != nil {
		return err
	}
	o.Forwards = append(o.Forwards, f)
	return nil
}

// setStdioForward records -W: as ssh, it also means no session, no
// terminal, no other forwards, and exit on a failed forward.
func (o *Options) setStdioForward(spec string) error {
	if o.StdioHost != "" {
		return usagef("stdio forward already specified")
	}
	h, p, err := parseStdioForward(spec)
	if err != nil {
		return err
	}
	o.StdioHost, o.StdioPort = h, p
	o.TTY, o.Session = TTYNever, SessionNone
	o.set["requesttty"], o.set["sessiontype"] = true, true
	o.other("clearallforwardings", "yes", true)
	o.other("exitonforwardfailure", "yes", true)
	o.ExitOnForwardFailure = true
	o.set["exitonforwardfailure"] = true
	return nil
}

// boolOption reads a yes/no ssh_config value into *dst the first time key
// is set, and keeps it for -G.
func (o *Options) boolOption(key, v string, dst *bool) error {
	b, ok := parseBool(v)
	if !ok {
		return usagef("-o %s: bad value %q", key, printable(v))
	}
	if !o.set[key] {
		*dst = b
	}
	o.other(key, v, false)
	o.set[key] = true
	return nil
}

// ActiveForwards are the -L, -D and -R forwards to set up: none with -W
// or ClearAllForwardings, as ssh.
func (o *Options) ActiveForwards() []Forward {
	if o.StdioHost != "" || o.otherValue("clearallforwardings") == "yes" {
		return nil
	}
	return o.Forwards
}
