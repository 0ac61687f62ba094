package boxagent

import (
	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/handover"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Read returns the repo's outbox entries after seq since; wait long-polls
// up to MaxReadWait for one.
func (c *Config) Read(k string, since int, wait time.Duration) (*agentwire.ReadResult, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	if since < 0 {
		return nil, usagef("--since %d: want 0 or more", since)
	}
	if wait < 0 || wait > MaxReadWait {
		return nil, usagef("--wait %v: want 0 to %d seconds", wait, int(MaxReadWait.Seconds()))
	}
	resp, err := c.call(Request{Op: "read", Repo: k, Since: since, WaitMS: wait.Milliseconds()})
	if err != nil {
		return nil, err
	}
	res := &agentwire.ReadResult{OK: true, Entries: resp.Entries, Status: resp.Status, Fault: resp.Fault}
	if res.Entries == nil {
		res.Entries = []agentwire.Entry{}
	}
	return res, nil
}

// Status lists the box's sessions, or repo k's.
func (c *Config) Status(k string) (*agentwire.StatusResult, error) {
	if k != "" {
		if err := checkKey(k); err != nil {
			return nil, err
		}
	}
	resp, err := c.call(Request{Op: "status", Repo: k})
	if err != nil {
		return nil, err
	}
	res := &agentwire.StatusResult{OK: true, Sessions: resp.Sessions}
	if res.Sessions == nil {
		res.Sessions = []agentwire.Session{}
	}
	return res, nil
}

// EndGrace is how long end waits for the CLI to exit before SIGTERM.
const EndGrace = 10 * time.Second

// End ends the repo's CLI (/exit, /quit for codex, SIGTERM after
// EndGrace), wipes its secrets and marks the copy returned.
func (c *Config) End(k string) (*agentwire.EndResult, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	unlock, err := c.holdSend(k)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r, err := c.readRecord(k)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, refusedf("nothing of %s is in this box", k)
	}
	if r.Started && r.CLI == "" {
		c.logf("ending the tmux sessions of %s: its record does not say which CLI runs", k)
		for _, kind := range agentwire.Kinds() {
			c.endCLI(SessionName(k, kind.Name()), kind.Name(), EndGrace)
		}
	} else if r.Started {
		// Its exit is then no fault of the CLI's.
		c.update(k, func(r *record) (*record, error) {
			if r == nil {
				return nil, nil
			}
			r.Ending = true
			return r, nil
		})
		c.logf("ending the %s session", r.CLI)
		// No lock is held here: the CLI's SessionEnd hook needs it.
		c.endCLI(SessionName(k, r.CLI), r.CLI, EndGrace)
	}
	c.wipeSecrets(k, true)
	r, err = c.update(k, func(r *record) (*record, error) {
		if r == nil {
			return nil, refusedf("nothing of %s is in this box", k)
		}
		r.Started, r.Status, r.Queue, r.Question, r.OffloadID, r.Secrets = false, StatusStopped, nil, false, "", nil
		r.Fault, r.Ending = nil, false
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	// The inbox tells its watchers; it may be down, which changes nothing.
	c.call(Request{Op: "rescan"})
	return &agentwire.EndResult{OK: true, Copy: r.copyState()}, nil
}

// WipeSecrets removes the repo's secrets now.
func (c *Config) WipeSecrets(k string) (*agentwire.OKResult, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	c.wipeSecrets(k, true)
	if _, err := c.update(k, func(r *record) (*record, error) {
		if r == nil {
			return nil, nil
		}
		r.Secrets = nil
		return r, nil
	}); err != nil {
		return nil, err
	}
	if _, err := os.Stat(c.SecretsDir(k)); err == nil {
		return nil, failedf("the secrets of %s are still in %s", k, c.SecretsDir(k))
	}
	return &agentwire.OKResult{OK: true}, nil
}

// Restart asks the inbox to start the repo's CLI afresh from its last
// hand-over.
func (c *Config) Restart(k string) (*agentwire.RestartResult, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	start := nowMS()
	resp, err := c.call(Request{Op: "restart", Repo: k})
	if err != nil {
		return nil, err
	}
	// As for send: a CLI that refuses to run is reported, never "started".
	res := &agentwire.RestartResult{OK: true, Delivery: resp.Delivery}
	res.Accepted = c.waitAccepted(k, start)
	if s, err := c.sessions(k); err == nil && len(s) == 1 && !res.Accepted && s[0].Status == StatusStopped {
		res.Exited, res.ExitLines = true, s[0].ExitLines
	}
	return res, nil
}

// Post adds an outbox entry of kind progress, question or back with the
// body read from r. Progress and back must be complete hand-overs; back
// first makes S' as refs/cocoonbox/back/<offload id> in the copy.
func (c *Config) Post(k, kind string, r io.Reader) (*agentwire.PostResult, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r, handover.Max+1))
	if err != nil {
		return nil, err
	}
	if kind != "question" {
		if err := handover.Validate(body); err != nil {
			return nil, &Error{Code: agentwire.CodeRefused, Err: err}
		}
	} else if len(body) > handover.Max {
		return nil, usagef("the question is over %d KiB", handover.Max>>10)
	}
	res := &agentwire.PostResult{OK: true, Status: "posted"}
	if kind == "back" {
		rec, err := c.readRecord(k)
		if err != nil {
			return nil, err
		}
		if rec == nil || rec.OffloadID == "" {
			return nil, refusedf("no offload of %s is in this box", k)
		}
		if !rec.NoRepo {
			oid, err := c.snapshotCommit(rec.Dir, "refs/cocoonbox/back/"+rec.OffloadID, "cocoonbox back "+rec.OffloadID)
			if err != nil {
				return nil, failedf("make S': %v", err)
			}
			c.logf("S' is %s (refs/cocoonbox/back/%s)", short(oid), rec.OffloadID)
		}
		res.Status = "ready"
	}
	resp, err := c.call(Request{Op: "post", Repo: k, Kind: kind, Body: string(body)})
	if err != nil {
		return nil, err
	}
	res.Seq = resp.Seq
	return res, nil
}

// Env returns the repo's environment report: through the inbox, waiting
// up to MaxEnvWait for the step to end, or as it stands with noWait.
func (c *Config) Env(k string, noWait bool) (*agentwire.EnvResult, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	if noWait {
		rep, err := c.readEnvReport(k)
		if err != nil {
			return nil, err
		}
		return &agentwire.EnvResult{OK: true, Report: rep}, nil
	}
	resp, err := c.call(Request{Op: "env", Repo: k, WaitMS: MaxEnvWait.Milliseconds()})
	if err != nil {
		return nil, err
	}
	if resp.Report != nil && !resp.Report.Done {
		return nil, failedf("the environment step of %s did not end within %v", k, MaxEnvWait)
	}
	return &agentwire.EnvResult{OK: true, Report: resp.Report}, nil
}

// FormatEnv is the report as text for the box agent.
func FormatEnv(k string, r *agentwire.EnvReport) string {
	if r == nil {
		return "no environment step for " + k + "\n"
	}
	var b strings.Builder
	state := "running"
	if r.Done {
		state = "done"
	}
	fmt.Fprintf(&b, "environment of %s: %s\n", k, state)
	if r.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", r.Error)
	}
	for _, t := range r.Tools {
		fmt.Fprintf(&b, "%s %s (from %s): installed %s: %s", t.Tool, t.Wanted, t.Source, orNone(t.Installed), t.State)
		if t.Detail != "" {
			fmt.Fprintf(&b, ": %s", t.Detail)
		}
		b.WriteByte('\n')
	}
	for _, l := range r.Lockfiles {
		fmt.Fprintf(&b, "%s: %s: %s", l.File, orNone(l.Command), l.State)
		if l.Detail != "" {
			fmt.Fprintf(&b, ": %s", l.Detail)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Event hands a hook's report to the inbox: payload is the hook's JSON
// (stdin for claude, the last argument for codex's notify).
func (c *Config) Event(k, cli, hook string, payload []byte) (*agentwire.OKResult, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	if err := checkKind(cli); err != nil {
		return nil, err
	}
	if hook == "" {
		return nil, usagef("--hook is required")
	}
	var raw json.RawMessage
	if len(strings.TrimSpace(string(payload))) > 0 {
		if !json.Valid(payload) {
			return nil, usagef("the %s payload is not JSON", hook)
		}
		raw = payload
	}
	req := Request{Op: "event", Repo: k, CLI: cli, Hook: hook, Payload: raw}
	if _, err := c.call(req); err != nil {
		// An inbox that is down (killed, restarting) gets the event when
		// it is back: a lost Stop would leave the session working for
		// good, and back waiting for a BACK that stays queued.
		if !errors.Is(err, errNoInbox) {
			return nil, err
		}
		if serr := c.spoolEvent(req); serr != nil {
			return nil, fmt.Errorf("%w; keeping the event for it: %v", err, serr)
		}
	}
	return &agentwire.OKResult{OK: true}, nil
}

// Serve runs the inbox until ctx ends.
func (c *Config) Serve(ctx context.Context) error {
	ib := NewInbox(c)
	lis, err := ib.Listen()
	if err != nil {
		return err
	}
	c.logf("inbox listening on %s", c.SocketPath())
	return ib.Serve(ctx, lis)
}
