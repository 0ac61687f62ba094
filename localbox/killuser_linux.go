package localbox

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// killUserOnce sends SIGKILL to every live process whose real or
// effective uid is uid and reports whether it found any. Each is looked
// at and signalled through a handle taken first (os.FindProcess holds a
// pidfd), so that the SIGKILL reaches the process looked at or none,
// never one that took its pid in between.
func killUserOnce(uid uint32) bool {
	ents, _ := os.ReadDir("/proc")
	want := strconv.FormatUint(uint64(uid), 10)
	found := false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := os.FindProcess(pid)
		if err != nil {
			continue
		}
		if liveOf(e.Name(), want) {
			p.Signal(syscall.SIGKILL)
			found = true
		}
		p.Release()
	}
	return found
}

// liveOf reports whether process pid (a name of /proc) is live (not a
// zombie) and its real or effective uid is uid, from /proc/PID/status.
func liveOf(pid, uid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return false
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
	return !strings.HasPrefix(state, "Z") && len(uids) >= 2 && (uids[0] == uid || uids[1] == uid)
}
