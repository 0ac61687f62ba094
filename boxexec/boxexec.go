// Package boxexec is the fast exec path of a container box: an exec
// server inside the box (`cocoonbox-agent exec-serve SOCKET`, started
// once per box start through the engine's API as the box user) connects
// out to a socket the host's local box listens on, takes each command
// with its pipes riding along (SCM_RIGHTS), starts it in a session of
// its own and reports its pid and how it ended; signals go as messages.
// A command's bytes then flow through one pipe between the command and
// the local box, as under the process engine, and never through the
// engine's daemon; the command still runs in the container's namespaces,
// cgroup, seccomp profile and capability set, as the exec server's child.
//
// The wire is a unix SOCK_SEQPACKET connection: each packet is one JSON
// message (message), the exec request's with its three descriptors.
// docs/protocol.md ("The container box's exec server") describes it.
package boxexec

import (
	"errors"
	"fmt"
	"syscall"
)

// Version is the exec server's protocol version, sent in its hello.
const Version = 1

// MaxRequest is the largest encoded exec request, in bytes: a packet of
// the socket (whose send buffer is ~208 KiB by default) holds it whole. A
// larger one gets ErrTooLarge; the caller takes another path.
const MaxRequest = 128 << 10

// maxReply is the largest message the host reads from the box: the box
// sends short ones only.
const maxReply = 4096

// Request is one command for the exec server.
type Request struct {
	// Path is the program to run, Args its argv (Args[0] included: "-bash"
	// makes a login shell).
	Path string   `json:"path"`
	Args []string `json:"args"`
	// Env is laid over the exec server's own environment (the
	// container's, as the engine gives an exec), later entries winning.
	Env []string `json:"env,omitempty"`
	// Dir is the working directory; "" is the server's.
	Dir string `json:"dir,omitempty"`
	// TTY, when set, starts the command on a terminal the server opens
	// in the box (the container's devpts) and relays to the request's
	// two pipes: stdin to the terminal, the terminal to stdout.
	TTY *TTY `json:"tty,omitempty"`
}

// TTY is a command's terminal: its size (0 by 0 leaves the kernel's),
// the client's modes in SSH's pty-req encoding (RFC 4254 section 8), and
// the client's compiled terminfo entry for Term, which the server puts
// in $HOME/.terminfo where it has none (Term is checked by the host:
// letters, digits and .+_- only).
type TTY struct {
	Rows     uint16 `json:"rows,omitempty"`
	Cols     uint16 `json:"cols,omitempty"`
	Modes    []byte `json:"modes,omitempty"`
	Term     string `json:"term,omitempty"`
	Terminfo []byte `json:"terminfo,omitempty"`
}

// message is one packet either way. Ops: host to box "exec" (Req, with
// stdin, stdout and stderr as SCM_RIGHTS; stdin and stdout alone with a
// TTY), "signal" (Signal), "kill" (SIGHUP now, SIGKILL after DelayMS),
// "resize" (Rows, Cols of a TTY); box to host "hello" (Version),
// "started" (Pid, or Errno and Error), "exit" (Code, or Signal).
type message struct {
	Op      string   `json:"op"`
	ID      uint64   `json:"id,omitempty"`
	Version int      `json:"version,omitempty"`
	Req     *Request `json:"req,omitempty"`
	Pid     int      `json:"pid,omitempty"`
	Errno   int      `json:"errno,omitempty"`
	Error   string   `json:"error,omitempty"`
	Code    int      `json:"code,omitempty"`
	Signal  int      `json:"signal,omitempty"`
	DelayMS int64    `json:"delay_ms,omitempty"`
	Rows    uint16   `json:"rows,omitempty"`
	Cols    uint16   `json:"cols,omitempty"`
}

// ErrNoServer is Start's error when no exec server is connected, or its
// connection broke before the request went: the command did not start.
var ErrNoServer = errors.New("no exec server in the box")

// ErrTooLarge is Start's error for a request longer than MaxRequest: the
// command did not start.
var ErrTooLarge = errors.New("exec request too large for the exec server")

// StartError is the exec server's report of a command it could not
// start: Errno is the system's error (ENOENT for a missing working
// directory), 0 when it had none.
type StartError struct {
	Errno syscall.Errno
	Msg   string
}

func (e *StartError) Error() string { return "start in the box: " + e.Msg }

// Unwrap is the errno, for errors.Is.
func (e *StartError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// Exit is how a command ended: Code, or the Signal that killed it (then
// Code is 0). Err is set when the exec server went away first.
type Exit struct {
	Code   int
	Signal syscall.Signal
	Err    error
}

func (e Exit) String() string {
	switch {
	case e.Err != nil:
		return e.Err.Error()
	case e.Signal != 0:
		return fmt.Sprintf("signal %d", int(e.Signal))
	}
	return fmt.Sprintf("exit %d", e.Code)
}
