package sessionwire

import "strings"

// The holder's files for the shell's way in, in its directory beside
// holder.sock: a box's shell that runs an Exec writes "PID REQUEST\n" into
// the FIFO RequestFIFO, then waits reading GateFIFO, which the holder
// holds open and never writes; PIDFile holds the holder's pid. The holder
// takes the Exec's stdin and stdout by pidfd_getfd(2), so that no process
// of ours starts between the Exec and the holder (docs/protocol.md
// "Resumable sessions").
const (
	RequestFIFO = "holder.req"
	GateFIFO    = "holder.gate"
	PIDFile     = "holder.pid"
)

// The descriptors of a shell's stdin and stdout while it waits on the
// gate (ShellRequest).
const (
	StdinFD  = 8
	StdoutFD = 9
)

// MaxShellRequest bounds the REQUEST a shell writes, in bytes: with its
// pid and the newline the line stays one atomic write into the FIFO
// (PIPE_BUF, 4096).
const MaxShellRequest = 3800

// ShellRequest is the REQUEST: an attacher's open without the
// environment, directory and terminal, which the holder reads from the
// shell's /proc (environ, cwd). Window is in nanoseconds.
type ShellRequest struct {
	Op     string `json:"op"`
	ID     string `json:"id"`
	Window int64  `json:"window"`
	Line   string `json:"line"`
}

// shellOpen is ShellOpen's text: when a holder serves (its FIFO, owned
// by this user, and the live pid it wrote), the shell writes its request
// and waits on the gate. The holder sends SIGTERM when the attachment
// ends (exit 0), or SIGUSR1 when it cannot take the streams (not pipes)
// or exits: the shell then runs the attacher, f, as it does where no
// holder serves, on its own stdin, stdout and stderr again (bash runs a
// trap inside the read, with the gate as its stdin). The gate's end (the holder died) exits 255.
const shellOpen = `f() { command -v cocoonbox-session >/dev/null && exec cocoonbox-session "$@"; exec cocoonbox-agent session "$@"; }; ` +
	`d=${COCOONBOX_RUN_DIR:-$XDG_RUNTIME_DIR}/cocoonbox-sessions; ` +
	`if [ "$d" != /cocoonbox-sessions ] && [ -p "$d/` + RequestFIFO + `" ] && [ -O "$d/` + RequestFIFO + `" ] && { read -r p <"$d/` + PIDFile + `"; } 2>/dev/null && kill -0 "$p" 2>/dev/null; then ` +
	`exec 7>&2 8<&0 9>&1; trap 'exit 0' TERM; trap 'exec 0<&8 1>&9 2>&7 7>&- 8<&- 9>&-; f "$@"' USR1; ` +
	`if printf '%s %s\n' "$$" %REQ% 1<>"$d/` + RequestFIFO + `"; then { read -r p <"$d/` + GateFIFO + `"; } 2>/dev/null; exit 255; fi; ` +
	`trap - TERM USR1; exec 7>&- 8<&- 9>&-; fi; f "$@"`

// ShellOpen returns the line for a POSIX shell (sh, dash, bash, zsh),
// to follow `set -- open ID WINDOW -- LINE; ` (an attacher's arguments),
// that takes the shell's way in with request, one quoted shell word,
// where a holder serves, and runs the attacher (cocoonbox-session, else
// cocoonbox-agent session) with those arguments where none does or it
// turns the shell away.
func ShellOpen(request string) string {
	return strings.Replace(shellOpen, "%REQ%", request, 1)
}
