package relay

import (
	"fmt"
	"strings"
)

// The listener's wire: what `cocoonbox-agent listen` writes on stdout,
// one JSON object a line, and reads on stdin (docs/cocoonbox-agent.md,
// "listen and take").

// Event is one line the box half of a listener writes on stdout: first
// "listening", then one "accept" per connection it accepted.
type Event struct {
	// Event is "listening" or "accept".
	Event string `json:"event"`
	// Port is, for "listening", the TCP port listened on (the one the
	// kernel chose when 0 was asked for); for "accept", the originator's
	// port (0 for a unix socket's peer).
	Port uint32 `json:"port,omitempty"`
	// Path is, for "listening", the unix socket listened on (the one made
	// for agent forwarding).
	Path string `json:"path,omitempty"`
	// Control is, for "listening", the unix socket where `cocoonbox-agent
	// take` picks up an accepted connection.
	Control string `json:"control,omitempty"`
	// ID names an accepted connection, for take and close: 1, 2, 3, ...
	ID uint64 `json:"id,omitempty"`
	// Host is, for "accept", the originator's address (empty for a unix
	// socket's peer).
	Host string `json:"host,omitempty"`
}

// Close is a line the laptop writes on a listener's stdin: close the
// accepted connection ID, which it will not take (the client refused the
// channel). EOF on stdin ends the listener.
type Close struct {
	Close uint64 `json:"close"`
}

// ExitListen is the listener's exit status when it could not listen
// (the address is in use, not the box's, or the socket path is taken);
// one line on stderr says why, and nothing is on stdout.
const ExitListen = 4

// ListenMode is what a box's listener listens on.
type ListenMode int

// The listener's modes.
const (
	// ListenTCP is a TCP port (ssh -R [bind:]port).
	ListenTCP ListenMode = iota
	// ListenUnix is a unix socket at a path the client names (ssh -R
	// /path.sock:...).
	ListenUnix
	// ListenAgent is a unix socket the listener makes for agent
	// forwarding, 0600 in a fresh 0700 directory (ssh -A).
	ListenAgent
)

// ListenSpec is what a listener in the box listens on.
type ListenSpec struct {
	Mode ListenMode
	// Host and Port are ListenTCP's bind address and port, as an SSH
	// client's tcpip-forward gives them (RFC 4254 section 7.1): "" or "*"
	// every address, "localhost" the loopback addresses of both families,
	// else that address; Port 0 asks the kernel for one.
	Host string
	Port uint32
	// Path is ListenUnix's socket path; relative to the workspace.
	Path string
}

// Check reports whether spec may be listened on: a host of letters,
// digits and ._:%- (or "" or "*"), a port up to 65535, a socket path
// CheckSocket accepts.
func (spec ListenSpec) Check() error {
	switch spec.Mode {
	case ListenTCP:
		if spec.Host != "" && spec.Host != "*" && (len(spec.Host) > 255 || !hostRE.MatchString(spec.Host)) {
			return fmt.Errorf("bad bind address %q: want a host name or an IP address", spec.Host)
		}
		if spec.Port > 65535 {
			return fmt.Errorf("bad port %d: want 0 to 65535", spec.Port)
		}
	case ListenUnix:
		return CheckSocket(spec.Path)
	case ListenAgent:
	default:
		return fmt.Errorf("unknown listen mode %d", spec.Mode)
	}
	return nil
}

// Args are the spec as `cocoonbox-agent listen`'s arguments: "tcp" HOST
// PORT (HOST "*" for every address, as "" would vanish from argv), "unix"
// PATH (a relative one starting with "-" given as "./-...", which is no
// option), or "agent".
func (spec ListenSpec) Args() []string {
	switch spec.Mode {
	case ListenUnix:
		if strings.HasPrefix(spec.Path, "-") {
			return []string{"unix", "./" + spec.Path}
		}
		return []string{"unix", spec.Path}
	case ListenAgent:
		return []string{"agent"}
	}
	host := spec.Host
	if host == "" {
		host = "*"
	}
	return []string{"tcp", host, fmt.Sprint(spec.Port)}
}

// String names what spec listens on, for messages: "localhost:8080",
// "*:0", "/run/x.sock", "an agent socket".
func (spec ListenSpec) String() string {
	switch spec.Mode {
	case ListenUnix:
		return spec.Path
	case ListenAgent:
		return "an agent socket"
	}
	host := spec.Host
	if host == "" {
		host = "*"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s:%d", host, spec.Port)
}
