//go:build unix

package proc

import (
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// NewSession makes cmd's process lead a session of its own (setsid), so it
// has no controlling terminal and its pid names its process group.
func NewSession(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
}

// NewGroup puts cmd's process in a process group of its own (setpgid),
// out of reach of the terminal's Ctrl-C.
func NewGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// Signal sends sig to the process pid.
func Signal(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// SignalGroup sends sig to every process of the group pid leads.
func SignalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// Alive reports whether a process pid exists (signal 0).
func Alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// SignalNum is the signal named name without its SIG prefix ("TERM"), in
// any case, or 0 for a name this system does not have.
func SignalNum(name string) syscall.Signal {
	return unix.SignalNum("SIG" + strings.ToUpper(name))
}

// ExitSignal is the name without SIG ("KILL") of the signal that ended
// ps's process, or "" when it exited by itself.
func ExitSignal(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return SignalName(ws.Signal())
	}
	return ""
}

// SignalName is sig's name without SIG ("KILL"), or "" for a number this
// system does not name.
func SignalName(sig syscall.Signal) string {
	return strings.TrimPrefix(unix.SignalName(sig), "SIG")
}

// NotifyResize relays each change of the terminal's size (SIGWINCH) to ch
// and reports true; signal.Stop(ch) ends it.
func NotifyResize(ch chan<- os.Signal) bool {
	signal.Notify(ch, syscall.SIGWINCH)
	return true
}
