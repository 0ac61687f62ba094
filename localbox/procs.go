package localbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// Every box command and inbox leads a session (and process group) of its
// own. Its leader's pid is recorded in DIR/procs/PID while the group may
// live, with a token of the leader's start time where the platform gives
// one, so that a local box killed with kill -9 leaves a list the next
// start sweeps: the groups it finds still alive are killed. A record stays
// after the leader exits while others of its group live (a command left in
// the background), so that stop and the next start end those too.

// markerVar is set to the state directory in every box command's
// environment. A command that leaves its process group (setsid, a daemon's
// double fork) escapes the records above; on Linux the server finds it by
// this variable in /proc/PID/environ (markedProcs), unless it replaced its
// environment.
const markerVar = "COCOONBOX_LOCALBOX"

// endMarked ends the processes markedProcs finds for this state: SIGTERM,
// then SIGKILL after grace (at once when grace is 0). It returns how many
// it found.
func (s *Server) endMarked(grace time.Duration) int {
	pids := markedProcs(markerVar + "=" + s.Dir)
	if len(pids) == 0 {
		return 0
	}
	sig := syscall.SIGTERM
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	for _, pid := range pids {
		proc.Signal(pid, sig)
	}
	for deadline := time.Now().Add(grace); grace > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !slices.ContainsFunc(pids, func(pid int) bool { return !exited(pid) }) {
			return len(pids)
		}
	}
	for _, pid := range pids {
		if !exited(pid) {
			proc.Signal(pid, syscall.SIGKILL)
		}
	}
	return len(pids)
}

func (s *Server) procsDir() string { return filepath.Join(s.Dir, "procs") }

// recordProc notes the process group led by pid.
func (s *Server) recordProc(pid int) {
	dir := s.procsDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.logf("record pid %d: %v", pid, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pid)), []byte(startToken(pid)+"\n"), 0o600); err != nil {
		s.logf("record pid %d: %v", pid, err)
	}
}

// forgetProc drops pid's record once nothing of its group lives.
func (s *Server) forgetProc(pid int) {
	if !groupAlive(pid) {
		os.Remove(filepath.Join(s.procsDir(), strconv.Itoa(pid)))
	}
}

// sweep ends every recorded process group still alive: SIGTERM, then
// SIGKILL after grace (at once when grace is 0), and drops the records.
// It returns how many groups it ended.
func (s *Server) sweep(grace time.Duration) int {
	ents, err := os.ReadDir(s.procsDir())
	if err != nil {
		return 0
	}
	var live []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		p := filepath.Join(s.procsDir(), e.Name())
		if err != nil || pid <= 1 {
			os.Remove(p)
			continue
		}
		tok, _ := os.ReadFile(p)
		if ours(pid, strings.TrimSpace(string(tok))) {
			live = append(live, pid)
		} else {
			os.Remove(p)
		}
	}
	if len(live) == 0 {
		return 0
	}
	if grace > 0 {
		for _, pid := range live {
			killGroup(pid, false)
		}
		for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			alive := false
			for _, pid := range live {
				alive = alive || groupAlive(pid)
			}
			if !alive {
				break
			}
		}
	}
	for _, pid := range live {
		killGroup(pid, true)
		os.Remove(filepath.Join(s.procsDir(), strconv.Itoa(pid)))
	}
	// SIGKILL takes a moment: wait (briefly) until the leaders are gone, so
	// that what they held (the inbox's socket) is free.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !slices.ContainsFunc(live, func(pid int) bool { return !exited(pid) }) {
			break
		}
	}
	return len(live)
}

// ours reports whether the recorded group pid is still alive and still the
// one recorded: a leader that lives must have the recorded start token (a
// pid reused since fails); a group whose leader has exited keeps its
// number while any member lives, so it cannot have been reused.
func ours(pid int, tok string) bool {
	if !groupAlive(pid) {
		return false
	}
	if !proc.Alive(pid) {
		return true
	}
	now := startToken(pid)
	return now == tok && isGroupLeader(pid)
}

// groupAlive reports whether any process of group pgid lives.
func groupAlive(pgid int) bool { return proc.SignalGroup(pgid, 0) == nil }

// killGroup sends SIGTERM, or SIGKILL when hard, to group pgid.
func killGroup(pgid int, hard bool) {
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	proc.SignalGroup(pgid, sig)
}
