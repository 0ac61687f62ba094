//go:build unix

package proc

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Group is a process group that the children of one command run in, so
// that what a command killed with SIGKILL leaves running (a git fetch,
// an rsync, the ssh under them: SIGKILL of a parent reaches none of its
// children) can be found and ended by the next command (EndGroup). Its
// leader is an anchor, a sh that waits on a pipe only this process
// holds: it lives while this process does, so the group's id is taken
// before any child starts and stays valid while children join, and it
// exits by itself at this process's end, by Close or a kill.
type Group struct {
	// Pgid is the group's id, the anchor's pid.
	Pgid int
	// Start is the anchor's StartToken: with Pgid, what a record of the
	// group holds (String), so that a pid reused since is told apart.
	Start string

	anchor *exec.Cmd
	hold   io.Closer
}

// StartGroup starts the anchor of a new process group (setpgid) and
// returns the group; the error is the anchor's start.
func StartGroup() (*Group, error) {
	c := exec.Command("/bin/sh", "-c", "read line")
	// Nothing of ours it does not need: no environment (a token), and
	// no working directory it would keep busy.
	c.Env, c.Dir = []string{}, "/"
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start the process group of this command's children: %w", err)
	}
	return &Group{Pgid: c.Process.Pid, Start: StartToken(c.Process.Pid), anchor: c, hold: w}, nil
}

// Join makes cmd's process start in g (setpgid to g.Pgid), out of reach
// of the terminal's Ctrl-C as NewGroup's are; a nil g leaves cmd as it is.
func (g *Group) Join(cmd *exec.Cmd) {
	if g == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = g.Pgid
}

// Close ends what is left in the group with SIGKILL (a child's own
// child that outlived it, as after a Ctrl-C that ended only the child
// that the command waited for; a daemon that left the group with setsid
// is not in it), then the anchor, and waits for the anchor. A nil g does
// nothing.
func (g *Group) Close() {
	if g == nil {
		return
	}
	SignalGroup(g.Pgid, syscall.SIGKILL)
	g.hold.Close()
	g.anchor.Wait()
}

// String is the record of g: "PGID START" (START may be empty).
func (g *Group) String() string { return strconv.Itoa(g.Pgid) + " " + g.Start }

// ErrGroupLives is in EndGroup's error when a group still has a live
// process after SIGKILL and the wait.
var ErrGroupLives = errors.New("still runs after SIGKILL")

// EndGroup ends the process group a record (Group.String) names, when
// it still lives and is the one recorded: SIGTERM to the group, then
// SIGKILL after grace to what is left, then up to wait for all of it to
// be gone (zombies count as gone). It reports whether it found the group
// alive; the error is a record it cannot read, or ErrGroupLives.
//
// The group is the one recorded when its anchor lives with the recorded
// start token, or when the anchor is gone and members remain: while any
// member lives, no new process can take the group's id. What it cannot
// tell is a group whose processes all exited, whose id a new process then
// took for a group of its own and left: of the user's own processes, and
// only in the time between a kill and the next command. The caller's own
// group is never signalled.
func EndGroup(record string, grace, wait time.Duration) (bool, error) {
	f := strings.Fields(record)
	if len(f) == 0 || len(f) > 2 {
		return false, fmt.Errorf("bad process group record %q", record)
	}
	pgid, err := strconv.Atoi(f[0])
	if err != nil || pgid <= 1 {
		return false, fmt.Errorf("bad process group record %q", record)
	}
	start := ""
	if len(f) == 2 {
		start = f[1]
	}
	if pgid == syscall.Getpgrp() || !groupLive(pgid) {
		return false, nil
	}
	if leaderLive(pgid) && StartToken(pgid) != start {
		return false, nil // the id is another process's now
	}
	SignalGroup(pgid, syscall.SIGTERM)
	for end := time.Now().Add(grace); groupLive(pgid) && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	if groupLive(pgid) {
		SignalGroup(pgid, syscall.SIGKILL)
	}
	for end := time.Now().Add(wait); groupLive(pgid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			return true, fmt.Errorf("process group %d %w", pgid, ErrGroupLives)
		}
	}
	return true, nil
}
