package main

import (
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// boxCPU is the CPU time the local box has used with the commands it
// waited for (/proc/PID/stat utime, stime, cutime, cstime), 0 when not
// known.
func (e *env) boxCPU() time.Duration {
	pid := e.boxPid()
	if pid == "" {
		return 0
	}
	return pidCPU(pid)
}

// boxPid is the local box's process id, "" when not known.
func (e *env) boxPid() string {
	out, err := e.ours("cocoonbox", "localbox", "status").Output()
	m := regexp.MustCompile(`\(pid (\d+)\)`).FindSubmatch(out)
	if err != nil || m == nil {
		return ""
	}
	return string(m[1])
}

// sshdCPU is the CPU time the listening sshd has used with the
// connections it reaped, once it has reaped every one (at most a second
// is waited for a connection's process still ending); 0 when not known.
func (e *env) sshdCPU() time.Duration {
	if e.sshdPid == 0 {
		return 0
	}
	pid := strconv.Itoa(e.sshdPid)
	for range 100 {
		if !hasChildren(pid) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return pidCPU(pid)
}

// pidCPU is process pid's utime, stime, cutime and cstime together.
func pidCPU(pid string) time.Duration {
	f, err := proc.StatFields(pid)
	if err != nil || len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, v := range f[11:15] { // fields 14 to 17
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// hasChildren reports whether some process has pid as its parent.
func hasChildren(pid string) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, d := range ents {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		if f, err := proc.StatFields(d.Name()); err == nil && len(f) > 1 && f[1] == pid {
			return true
		}
	}
	return false
}
