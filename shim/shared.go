package shim

// The pieces of the shim's semantics that the protocol mode (package
// sshserve) shares, so that `ssh` through cocoonbox-ssh --stdio and
// cocoonbox-ssh itself run the same command in the box.

import "path"

// SubsystemLine is the box command line that starts subsystem name, as -s
// runs it: only "sftp" exists, the box's sftp-server; prog names us in the
// line the box prints when it has none. Any other name is an error.
func SubsystemLine(name, prog string) (string, error) {
	return subsystemLine(name, prog, sftpServers)
}

// Terminfo is the local compiled terminfo entry for terminal name, looked
// up as ncurses does with getenv's TERMINFO, HOME and TERMINFO_DIRS, as
// the shim sends it with a terminal; nil when there is none.
func Terminfo(name string, getenv func(string) string) []byte {
	return terminfo(name, getenv)
}

// AcceptEnv is the box's AcceptEnv, as sshd_config(5) names it: the
// patterns (path.Match syntax) of the variables a client's SendEnv or
// SetEnv may set in the box, Debian's sshd_config list (LANG LC_*) and its
// newer COLORTERM NO_COLOR, TERM, and GIT_PROTOCOL, which git sends for
// protocol version 2. Any other variable sent is dropped, as sshd drops
// it.
var AcceptEnv = []string{"LANG", "LC_*", "TERM", "COLORTERM", "NO_COLOR", "GIT_PROTOCOL"}

// The values of SSH_CONNECTION and SSH_CLIENT in the box, shaped as
// sshd's ("CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT", "CLIENT_IP
// CLIENT_PORT SERVER_PORT"). A box command's client is no TCP peer of the
// box (its stream comes through the service's API, or ssh's ProxyCommand
// pipe), so both ends are the loopback address with port 0, "unknown".
// Tools test that these are set (Debian's bash reads ~/.bashrc for a
// command only then; tmux, scripts that ask "am I remote"), few read them.
const (
	SSHConnection = "127.0.0.1 0 127.0.0.1 0"
	SSHClient     = "127.0.0.1 0 0"
)

// SessionEnv is the environment a session sends for its command, from
// sent, what the client's SendEnv and SetEnv asked for (name to value; nil
// for none): the variables AcceptEnv lets through, and SSH_CONNECTION and
// SSH_CLIENT, which sshd sets over anything sent. The box sets SSH_TTY
// itself, with a terminal.
func SessionEnv(sent map[string]string) map[string]string {
	env := map[string]string{}
	for k, v := range sent {
		if AcceptsEnv(k) {
			env[k] = v
		}
	}
	env["SSH_CONNECTION"] = SSHConnection
	env["SSH_CLIENT"] = SSHClient
	return env
}

// AcceptsEnv reports whether name matches AcceptEnv.
func AcceptsEnv(name string) bool {
	for _, p := range AcceptEnv {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}
