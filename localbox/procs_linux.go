package localbox

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// startToken is pid's start time, or "" when pid is gone.
func startToken(pid int) string { return proc.StartToken(pid) }

// exited reports whether pid is gone, or a zombie whose threads have all
// exited (an orphan's reaper may be slow, or absent in a container). The
// leader thread of a process killed with SIGKILL can show Z while its other
// threads still exit and hold the process's descriptors (a listening
// socket answers): only with one thread left are they closed.
func exited(pid int) bool {
	f, err := proc.StatFields(strconv.Itoa(pid))
	if err != nil {
		return true
	}
	// State is field 3, num_threads field 20.
	return len(f) >= 18 && f[0] == "Z" && f[17] == "1"
}

// markedProcs lists the processes (not this one) whose initial
// environment holds every entry of markers ("NAME=VALUE"), as
// /proc/PID/environ shows it, among those of the uids in uids (every
// one's when nil): served by root, the environment of no process but a
// box user's is read, and no other process is ended for a marker. It
// reads at most environLimit of each; processes it may not read are
// passed over. Each is a handle taken before the process was looked at
// (os.FindProcess holds a pidfd): a signal through it reaches the
// process looked at or none, never one that took its pid since
// (TestHostileMarkedPidReused). The caller releases them.
func markedProcs(uids []uint32, markers ...string) []*os.Process {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []*os.Process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !ofUIDs(e.Name(), uids) {
			continue
		}
		p, err := os.FindProcess(pid)
		if err != nil {
			continue
		}
		if ofUIDs(e.Name(), uids) && hasEntries(e.Name(), markers) {
			out = append(out, p)
		} else {
			p.Release()
		}
	}
	return out
}

// ofUIDs reports whether process pid (a name of /proc) is of one of uids,
// or uids is nil.
func ofUIDs(pid string, uids []uint32) bool {
	if uids == nil {
		return true
	}
	fi, err := os.Stat("/proc/" + pid)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && slices.Contains(uids, st.Uid)
}

// hasEntries reports whether the initial environment of process pid (a
// name of /proc) holds every one of entries, in its first environLimit
// bytes.
func hasEntries(pid string, entries []string) bool {
	f, err := os.Open("/proc/" + pid + "/environ")
	if err != nil {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(f, environLimit))
	f.Close()
	have := bytes.Split(b, []byte{0})
	for _, want := range entries {
		if !slices.ContainsFunc(have, func(kv []byte) bool { return string(kv) == want }) {
			return false
		}
	}
	return true
}

// environLimit bounds what markedProcs reads of one environment: the
// marker is among the first entries of a box command's; a command that
// buries it deeper has left on purpose, as one that clears it has.
const environLimit = 256 << 10

// waitExited waits until pid, a child of ours, has exited, without
// reaping it (waitid with WNOWAIT): while it is a zombie its pid, and so
// its group's id, is no other process's. It reports whether it waited.
func waitExited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil
		}
	}
}

// groupOfUIDs reports whether group pgid has a live process and the
// real uid of every live process in it is one of uids, from /proc: a
// group signalled by root after this is the group looked at, unless all
// of it exits and another takes its id in between.
func groupOfUIDs(pgid int, uids []uint32) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	found := false
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || !inGroup(e.Name(), pgid) {
			continue
		}
		uid, ok := realUID(e.Name())
		if !ok {
			continue // gone meanwhile
		}
		if !slices.Contains(uids, uid) {
			return false
		}
		found = true
	}
	return found
}

// inGroup reports whether process pid (a name of /proc) lives, not a
// zombie, in group pgid.
func inGroup(pid string, pgid int) bool {
	f, err := proc.StatFields(pid)
	if err != nil {
		return false
	}
	// Fields 3 on: state, ppid, pgrp.
	return len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X"
}

// realUID is process pid's real uid, from /proc/PID/status.
func realUID(pid string) (uint32, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, err := strconv.ParseUint(f[0], 10, 32)
				return uint32(n), err == nil
			}
		}
	}
	return 0, false
}

// groupHasLive reports whether a process of group pgid lives that is not
// a zombie.
func groupHasLive(pgid int) bool { return proc.GroupLive(pgid) }
