package proc

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/windows"
)

// NewSession starts cmd's process in a process group of its own and
// without our console: Windows has no sessions.
func NewSession(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS
}

// NewGroup starts cmd's process in a process group of its own, out of
// reach of the console's Ctrl-C.
func NewGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP
}

// errNoSignals is what a signal other than KILL or TERM gets on Windows.
var errNoSignals = errors.New("windows has no signals but kill")

// Signal ends the process pid for SIGKILL and SIGTERM (Windows can only
// terminate a process) and fails for any other signal.
func Signal(pid int, sig syscall.Signal) error {
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return errNoSignals
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	defer p.Release()
	return p.Kill()
}

// SignalGroup is Signal for the group's leader alone.
func SignalGroup(pid int, sig syscall.Signal) error { return Signal(pid, sig) }

// Alive reports whether a process pid exists and has not exited.
func Alive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	var code uint32
	return windows.GetExitCodeProcess(h, &code) == nil && code == 259 // STILL_ACTIVE
}

var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
	"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM,
}

// SignalNum is the signal named name without its SIG prefix, in any case,
// or 0: Windows knows HUP, INT, QUIT, KILL and TERM only by number.
func SignalNum(name string) syscall.Signal { return signals[strings.ToUpper(name)] }

// SignalName is sig's name without SIG ("KILL") among those SignalNum
// knows, or "".
func SignalName(sig syscall.Signal) string {
	for k, v := range signals {
		if v == sig {
			return k
		}
	}
	return ""
}

// ExitSignal is always "": no Windows process ends by a signal.
func ExitSignal(*os.ProcessState) string { return "" }

// NotifyResize reports false: a Windows console sends no signal when it
// is resized, so the size is only read at start.
func NotifyResize(chan<- os.Signal) bool { return false }
