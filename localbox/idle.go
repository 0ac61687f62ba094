package localbox

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"time"

	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// Idle hibernate (seeds/001 "Idle user boxes"): with Server.IdleHibernate
// set, a running box that no client call has held, begun or ended for
// that long (counted from its last wake too) is saved and hibernated,
// unless an offloaded session in it is working, as `cocoonbox-agent
// offload status` run as the box user says. An answer the box does not
// give within idleAsk keeps it up until the next check. An open Exec (a
// terminal included) is a client call; a job left under nohup or tmux is
// not, and is paused with the box.

// DefaultIdleCheck is how often the idle clock is read when
// Server.IdleCheck is zero.
const DefaultIdleCheck = time.Minute

// idleAsk bounds the offload status a check runs in a box.
const idleAsk = 15 * time.Second

// idleLoop checks the running boxes every IdleCheck until done closes.
func (s *Server) idleLoop(done <-chan struct{}) {
	every := s.IdleCheck
	if every <= 0 {
		every = DefaultIdleCheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			for _, b := range s.reg.all() {
				s.idleCheck(b)
			}
		}
	}
}

// idleSince says whether b runs with no Exec open and no call begun or
// ended for d, and returns its clock.
func (b *box) idleFor(d time.Duration) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Hibernated || b.deleted || len(b.execs) > 0 {
		return time.Time{}, false
	}
	return b.active, time.Since(b.active) >= d
}

// idleCheck hibernates b when it has been idle for IdleHibernate and no
// offloaded session works in it.
func (s *Server) idleCheck(b *box) {
	since, idle := b.idleFor(s.IdleHibernate)
	if !idle {
		return
	}
	working, err := s.sessionWorking(b)
	if err != nil {
		s.logf("box %s: idle for %s, kept up: its offload status did not answer (%v)", b.Name, s.IdleHibernate, err)
		return
	}
	if working {
		return
	}
	nop := func(*controlv1.OperationEvent) error { return nil }
	var failedSave string
	s.saveBox(b, func(ev *controlv1.OperationEvent) error {
		if ev.GetOutcome() == controlv1.Outcome_OUTCOME_FAILED {
			failedSave = ev.GetError()
		}
		return nil
	})
	// A client that came meanwhile keeps the box up.
	if now, idle := b.idleFor(s.IdleHibernate); !idle || !now.Equal(since) {
		return
	}
	if failedSave != "" {
		s.logf("box %s: save failed (%s); hibernating it", b.Name, failedSave)
	}
	s.hibernateBox(b, nop)
	s.logf("box %s: hibernated after %s idle", b.Name, s.IdleHibernate)
}

// sessionWorking runs `cocoonbox-agent offload status` in b as its user
// and says whether it lists a session working. A box without the agent
// has none.
func (s *Server) sessionWorking(b *box) (bool, error) {
	agent := s.agentPath()
	if agent == "" {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), idleAsk)
	defer cancel()
	var out bytes.Buffer
	if c, ok := s.eng.(*containerEngine); ok {
		data, err := c.agentOutput(ctx, b, "offload", "status")
		if err != nil {
			return false, err
		}
		out.Write(data)
	} else {
		cmd := exec.CommandContext(ctx, agent, "offload", "status")
		cmd.Dir = b.home()
		cmd.Env = s.environ(b, &controlv1.Start{})
		cmd.SysProcAttr = s.sysProcAttr(b)
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			return false, err
		}
	}
	var r struct {
		OK       bool `json:"ok"`
		Sessions []struct {
			Status string `json:"status"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return false, err
	}
	for _, x := range r.Sessions {
		if x.Status == "working" {
			return true, nil
		}
	}
	return false, nil
}
