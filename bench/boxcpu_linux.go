package main

import (
	"regexp"
	"strconv"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// boxCPU is the CPU time the local box has used with the commands it
// waited for (/proc/PID/stat utime, stime, cutime, cstime), 0 when not
// known.
func (e *env) boxCPU() time.Duration {
	out, err := e.ours("cocoonbox", "localbox", "status").Output()
	m := regexp.MustCompile(`\(pid (\d+)\)`).FindSubmatch(out)
	if err != nil || m == nil {
		return 0
	}
	f, err := proc.StatFields(string(m[1]))
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
