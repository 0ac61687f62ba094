package proc

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// zombie is SZOMB of sys/proc.h.
const zombie = 5

// StartToken is pid's start time from the kernel's process table
// (p_starttime, "SEC.USEC"): with the pid, it names one process across
// pid reuse. It is "" when pid is gone.
func StartToken(pid int) string {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		return ""
	}
	t := kp.Proc.P_starttime
	return fmt.Sprintf("%d.%06d", t.Sec, t.Usec)
}

// groupLive reports whether a process of group pgid lives that is not a
// zombie, from the kernel's process table.
func groupLive(pgid int) bool {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	if err != nil {
		return SignalGroup(pgid, 0) == nil
	}
	for _, kp := range kps {
		if kp.Proc.P_stat != zombie {
			return true
		}
	}
	return false
}

// leaderLive reports whether process pid lives and is not a zombie.
func leaderLive(pid int) bool {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	return err == nil && kp.Proc.P_pid == int32(pid) && kp.Proc.P_stat != zombie
}
