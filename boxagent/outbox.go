package boxagent

// The outbox: the box agent's posts, and read's long poll of them.

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/handover"
)

// post adds an outbox entry.
func (ib *Inbox) post(req Request) (*Response, error) {
	switch req.Kind {
	case "progress", "back":
		if err := handover.Validate([]byte(req.Body)); err != nil {
			return nil, usagef("%v", err)
		}
	case "question":
		if strings.TrimSpace(req.Body) == "" {
			return nil, usagef("a question needs a body")
		}
		if len(req.Body) > handover.Max {
			return nil, usagef("the question is over %d KiB", handover.Max>>10)
		}
	default:
		return nil, usagef("bad post kind %q: want progress, question or back", req.Kind)
	}
	var resp Response
	var line *WatchLine
	_, err := ib.cfg.update(req.Repo, func(r *record) (*record, error) {
		if r == nil {
			return nil, refusedf("no copy of %s in this box", req.Repo)
		}
		r.OutboxSeq++
		resp.Seq = r.OutboxSeq
		if r.Fault != nil && r.Fault.Kind == agentwire.FaultRetrying {
			r.Fault = nil // the box agent's model answers again
		}
		if req.Kind == "question" {
			r.Question = true
		} else if err := os.WriteFile(ib.handoverOut(r.Repo), []byte(req.Body), 0o600); err != nil {
			return nil, err
		}
		if err := appendLine(ib.cfg.outboxPath(r.Repo), agentwire.Entry{Seq: r.OutboxSeq, Kind: req.Kind, OffloadID: r.OffloadID, CLI: r.CLI, TimeMS: nowMS(), Body: req.Body}); err != nil {
			return nil, err
		}
		line = statusLine(r)
		line.Entry, line.Seq = req.Kind, r.OutboxSeq
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	ib.notify(line)
	return &resp, nil
}

// MaxReadWait is the longest read long poll.
const MaxReadWait = 600 * time.Second

func (ib *Inbox) read(ctx context.Context, req Request) (*Response, error) {
	if req.WaitMS < 0 || time.Duration(req.WaitMS)*time.Millisecond > MaxReadWait {
		return nil, usagef("wait_ms %d: want 0 to %d", req.WaitMS, MaxReadWait.Milliseconds())
	}
	return ib.poll(ctx, time.Duration(req.WaitMS)*time.Millisecond, func() (*Response, bool, error) {
		entries, err := ib.cfg.readOutbox(req.Repo, req.Since)
		if err != nil {
			return nil, false, err
		}
		r, err := ib.cfg.readSettled(req.Repo)
		if err != nil {
			return nil, false, err
		}
		if r == nil {
			return nil, false, refusedf("no copy of %s in this box", req.Repo)
		}
		return &Response{Entries: entries, Status: r.Status, Fault: faultNow(r)}, len(entries) > 0, nil
	})
}
