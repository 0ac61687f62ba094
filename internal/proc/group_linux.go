package proc

import (
	"os"
	"strconv"
	"strings"
)

// StartToken is pid's start time in clock ticks since boot (field 22 of
// /proc/PID/stat): with the pid, it names one process across pid reuse.
// It is "" when pid is gone.
func StartToken(pid int) string {
	f, err := StatFields(strconv.Itoa(pid))
	if err != nil || len(f) < 20 {
		return ""
	}
	return f[19]
}

// StatFields is /proc/PID/stat's fields from the third (state) on: f[0]
// is field 3. The command name, field 2, is in parentheses and may hold
// spaces, so they start after the last ')'; none when it has none. The
// error is the read's: pid is gone.
func StatFields(pid string) ([]string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, nil
	}
	return strings.Fields(s[i+1:]), nil
}

// liveIn reports whether process pid (a name of /proc) lives, not a
// zombie, in group pgid (any group when pgid is 0).
func liveIn(pid string, pgid int) bool {
	f, err := StatFields(pid)
	if err != nil || len(f) < 3 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	// Fields 3 on: state, ppid, pgrp.
	return pgid == 0 || f[2] == strconv.Itoa(pgid)
}

// GroupLive reports whether a process of group pgid lives that is not a
// zombie, from /proc (a killed orphan's reaper may be slow, or absent in
// a container).
func GroupLive(pgid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil && liveIn(e.Name(), pgid) {
			return true
		}
	}
	return false
}

func groupLive(pgid int) bool { return GroupLive(pgid) }

// leaderLive reports whether process pid lives and is not a zombie.
func leaderLive(pid int) bool { return liveIn(strconv.Itoa(pid), 0) }
