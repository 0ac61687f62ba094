package boxagent

// The pane watcher: what holds each session's terminal, a CLI found
// exited, a paste that needs its Enter again.

import (
	"context"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// PaneCheckEvery is how often the inbox looks for a session whose CLI has
// exited.
const PaneCheckEvery = time.Second

// atPrompt reports whether a session with status st takes a paste now.
func atPrompt(st string) bool {
	return st == StatusIdle || st == StatusBlocked || st == StatusWaiting
}

// paneState is what holds the terminal of a session's pane.
type paneState int

const (
	paneCLI    paneState = iota // the session's CLI
	paneNotYet                  // the shell, and the CLI has not run yet
	paneExited                  // the shell or another program: the CLI ran and is gone
)

// checkPane finds what holds the terminal of r's pane, and records the
// CLI's pid in r when it is the CLI. Text goes into the pane only when it
// is: pasted into the login shell, a message would run as commands.
func (c *Config) checkPane(r *record) paneState {
	pid := c.tmuxForeground(SessionName(r.Repo, r.CLI))
	switch {
	case pid != 0 && (r.CLIPid == 0 || pid == r.CLIPid):
		r.CLIPid = pid
		return paneCLI
	case r.CLIPid != 0 || r.HookAtMS != 0:
		return paneExited
	}
	return paneNotYet
}

// PasteConfirm is how long after a paste to claude its UserPromptSubmit
// hook must have come before Enter is pressed once more.
const PasteConfirm = 5 * time.Second

// confirmPaste presses Enter once more when claude has not taken a paste
// within PasteConfirm (no UserPromptSubmit since): on a loaded machine
// the Enter can still reach it with the end of the paste, and the text
// would sit at its prompt unsent. An Enter at claude's empty prompt does
// nothing. It runs after r's update, in the background.
func (ib *Inbox) confirmPaste(r *record, at int64) {
	if !agentwire.ConfirmsPaste(agentwire.KindOf(r.CLI)) {
		return
	}
	repo, started := r.Repo, r.StartedAtMS
	go func() {
		time.Sleep(PasteConfirm)
		cur, err := ib.cfg.readRecord(repo)
		if err != nil || cur == nil || !cur.running() || cur.StartedAtMS != started || cur.HookAtMS >= at {
			return
		}
		session := SessionName(cur.Repo, cur.CLI)
		if pid := ib.cfg.tmuxForeground(session); pid == 0 || pid != cur.CLIPid {
			return
		}
		ib.cfg.logf("claude took no paste in %v (no UserPromptSubmit): Enter once more", PasteConfirm)
		ib.cfg.tmux(nil, "send-keys", "-t", target(session), "Enter")
	}()
}

// markExited marks r's session stopped because its CLI has exited, and
// keeps the pane's last lines (what the CLI said as it went). A CLI that
// exited on its own (not ended by end, and without its session-end hook)
// is a fault: it returns the fault's watch line, or nil.
func (c *Config) markExited(r *record) *WatchLine {
	c.logf("the %s session of %s has exited: marked stopped", r.CLI, r.Repo)
	ended := r.Status == StatusStopped || r.Ending
	r.Status, r.Question, r.Queue = StatusStopped, false, nil
	r.ExitLines = c.tmuxLastLines(SessionName(r.Repo, r.CLI), exitLines)
	if ended {
		return nil
	}
	w, err := c.setFault(r, agentwire.FaultExited, exitLine(agentwire.KindOf(r.CLI).Title(), r.ExitLines))
	if err != nil {
		c.logf("record the exit of %s: %v", r.Repo, err)
	}
	return w
}

// exitLines is how many of the pane's last lines an exited session keeps.
const exitLines = 8

// watchPanes looks at every running session's pane each interval until
// ctx ends: a session whose tmux session is gone, or whose CLI no longer
// holds its pane's terminal after it was seen there, has exited (a crash,
// a kill, a CLI that quit without a hook) and is marked stopped, so that
// status, send, read and back say so within seconds. It also looks for
// the faults no hook reports (checkFaults).
func (ib *Inbox) watchPanes(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		recs, err := ib.cfg.records()
		if err != nil {
			continue
		}
		for _, r0 := range recs {
			if !r0.running() {
				continue
			}
			// One a hook spooled as this inbox started.
			ib.replayEvents(r0.Repo)
			var lines []*WatchLine
			ib.cfg.update(r0.Repo, func(r *record) (*record, error) {
				if r == nil || !r.running() || r.CLI != r0.CLI || r.StartedAtMS != r0.StartedAtMS {
					return nil, nil
				}
				session := SessionName(r.Repo, r.CLI)
				status := r.Status
				if !ib.cfg.tmuxAlive(session) {
					ib.cfg.logf("the tmux session %s is gone: marked stopped", session)
					r.Status, r.Question, r.Queue = StatusStopped, false, nil
					if !r.Ending {
						w, err := ib.cfg.setFault(r, agentwire.FaultExited, "its tmux session "+session+" is gone")
						if err != nil {
							ib.cfg.logf("record the end of %s: %v", session, err)
						}
						lines = append(lines, w)
					}
				} else if before, pane := r.CLIPid, ib.cfg.checkPane(r); pane == paneExited {
					lines = append(lines, ib.cfg.markExited(r))
				} else if changed, ls := ib.checkFaults(r, n, pane); changed || r.CLIPid != before {
					lines = append(lines, ls...)
				} else {
					return nil, nil
				}
				if r.Status != status {
					lines = append(lines, statusLine(r))
				}
				return r, nil
			})
			for _, l := range lines {
				ib.notify(l)
			}
			if len(lines) == 0 {
				ib.notify(nil)
			}
		}
	}
}
