package localbox

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// killUserOnce sends SIGKILL to every live process whose real or
// effective uid is uid and reports whether it found any.
func killUserOnce(uid uint32) bool {
	pids := uidProcs(uid)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(pids) > 0
}

// uidProcs are the live processes (not zombies) whose real or effective
// uid is uid, from /proc/PID/status.
func uidProcs(uid uint32) []int {
	ents, _ := os.ReadDir("/proc")
	want := strconv.FormatUint(uint64(uid), 10)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var state string
		var uids []string
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "State:"); ok {
				state = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				uids = strings.Fields(v)
			}
		}
		if strings.HasPrefix(state, "Z") || len(uids) < 2 {
			continue
		}
		if uids[0] == want || uids[1] == want {
			out = append(out, pid)
		}
	}
	return out
}
