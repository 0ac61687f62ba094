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
// environment. Anyone may set it in their own processes, so only those of
// the box users' uids are looked at and ended (boxUIDs).
const markerVar = "COCOONBOX_LOCALBOX"

// boxMarkerVar is set to the box's id beside markerVar, so that a box's
// delete finds what of that box alone left its process group.
const boxMarkerVar = "COCOONBOX_LOCALBOX_BOX"

// endMarked ends the processes markedProcs finds for this state: SIGTERM,
// then SIGKILL after grace (at once when grace is 0). It returns how many
// it found.
func (s *Server) endMarked(grace time.Duration) int {
	return endProcs(markedProcs(s.boxUIDs(), markerVar+"="+s.Dir), grace)
}

// endBoxMarked is endMarked for box b's processes alone.
func (s *Server) endBoxMarked(b *box, grace time.Duration) int {
	return endProcs(markedProcs(s.boxUIDs(), markerVar+"="+s.Dir, boxMarkerVar+"="+b.ID), grace)
}

// endProcs ends ps, and releases them: SIGTERM, then SIGKILL after grace
// (at once when grace is 0), each through its handle, so that a pid one
// freed and another process took meanwhile is never signalled. It
// returns how many there were.
func endProcs(ps []*os.Process, grace time.Duration) int {
	if len(ps) == 0 {
		return 0
	}
	defer func() {
		for _, p := range ps {
			p.Release()
		}
	}()
	ids := make([]int, len(ps))
	for i := range ids {
		ids[i] = i
	}
	terminate(ids, grace, func(i int, hard bool) {
		sig := syscall.SIGTERM
		if hard {
			sig = syscall.SIGKILL
		}
		ps[i].Signal(sig)
	}, func(i int) bool {
		return ps[i].Signal(syscall.Signal(0)) != nil || exited(ps[i].Pid)
	})
	return len(ps)
}

// terminate ends each of ids with kill: SIGTERM (hard false), then, after
// up to grace for all to be gone, SIGKILL to each not gone (at once when
// grace is 0). A gone one is not signalled again: its number may be reused.
func terminate(ids []int, grace time.Duration, kill func(id int, hard bool), gone func(id int) bool) {
	if grace > 0 {
		for _, id := range ids {
			kill(id, false)
		}
		for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if !slices.ContainsFunc(ids, func(id int) bool { return !gone(id) }) {
				break
			}
		}
	}
	for _, id := range ids {
		if !gone(id) {
			kill(id, true)
		}
	}
}

func (s *Server) procsDir() string { return filepath.Join(s.Dir, "procs") }

// recordProc notes the process group led by pid, a process of box b: its
// record holds the leader's start token, then the box's id.
func (s *Server) recordProc(b *box, pid int) {
	dir := s.procsDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.logf("record pid %d: %v", pid, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pid)), []byte(startToken(pid)+"\n"+b.ID+"\n"), 0o600); err != nil {
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
func (s *Server) sweep(grace time.Duration) int { return s.sweepWhere(grace, "") }

// sweepWhere is sweep for the records of box id boxID alone, or of every
// box when boxID is "".
func (s *Server) sweepWhere(grace time.Duration, boxID string) int {
	return sweepRecords(s.Dir, s.boxUIDs(), grace, boxID, s.logf)
}

// sweepRecords is sweepWhere for the records of the state directory dir,
// served by root when uids is not nil: a group is then signalled only
// while every process in it is of one of uids.
func sweepRecords(dir string, uids []uint32, grace time.Duration, boxID string, logf func(string, ...any)) int {
	procs := filepath.Join(dir, "procs")
	ents, err := os.ReadDir(procs)
	if err != nil {
		return 0
	}
	var live []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		p := filepath.Join(procs, e.Name())
		if err != nil || pid <= 1 {
			os.Remove(p)
			continue
		}
		rec, _ := os.ReadFile(p)
		tok, id, _ := strings.Cut(strings.TrimSpace(string(rec)), "\n")
		if boxID != "" && id != boxID {
			continue
		}
		if ours(pid, tok) {
			live = append(live, pid)
		} else {
			os.Remove(p)
		}
	}
	if len(live) == 0 {
		return 0
	}
	// Served by root, a group is signalled only while every process in
	// it is a box user's: once the recorded one is gone, its id may be
	// any group's, and a record from before a crash or a reboot may name
	// a group of root's (TestHostileRecordedGroupReused).
	terminate(live, grace, func(pgid int, hard bool) {
		if uids == nil || groupOfUIDs(pgid, uids) {
			killGroup(pgid, hard)
		}
	}, func(pid int) bool { return !groupAlive(pid) })
	for _, pid := range live {
		os.Remove(filepath.Join(procs, strconv.Itoa(pid)))
	}
	// SIGKILL takes a moment: wait (briefly) until the leaders are gone, all
	// their threads with them, so that what they held (the inbox's socket)
	// is free.
	left := slices.Clone(live)
	for deadline := time.Now().Add(2 * time.Second); len(left) > 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		left = slices.DeleteFunc(left, exited)
	}
	for _, pid := range left {
		logf("pid %d still exits after SIGKILL; what it holds may not be free yet", pid)
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
