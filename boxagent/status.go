package boxagent

// The status of the sessions, with their transcripts' times.

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// sessions is the status of every copy, or of repo k alone.
func (ib *Inbox) sessions(k string) ([]agentwire.Session, error) {
	return ib.cfg.sessions(k)
}

func (c *Config) sessions(k string) ([]agentwire.Session, error) {
	var recs []*record
	if k != "" {
		r, err := c.readRecord(k)
		if err != nil {
			return nil, err
		}
		if r != nil {
			recs = append(recs, r)
		}
	} else {
		var err error
		if recs, err = c.records(); err != nil {
			return nil, err
		}
	}
	out := []agentwire.Session{}
	for _, r := range recs {
		s := agentwire.Session{
			Repo: r.Repo, Name: r.Name, CLI: r.CLI, OffloadID: r.OffloadID, Status: r.Status,
			Copy: r.copyState(), HookAtMS: r.HookAtMS, InboxSeq: r.InboxSeq, OutboxSeq: r.OutboxSeq,
			ExitLines: r.ExitLines, Fault: faultNow(r),
		}
		if s.Status == "" {
			s.Status = StatusStopped
		}
		if r.Started {
			session := SessionName(r.Repo, r.CLI)
			s.TmuxAlive = c.tmuxAlive(session)
			if s.TmuxAlive {
				s.WindowActivityMS = c.tmuxWindowActivity(session)
			}
			s.TranscriptMtimeMS = c.transcriptMtime(r)
			// Hooks are silent when the CLI shows life after its start but
			// no hook has reached us: managed settings may block them.
			s.HooksSilent = r.running() && r.HookAtMS == 0 && agentwire.KindOf(r.CLI).HookSettings(c.Home) != nil &&
				(s.TranscriptMtimeMS > r.StartedAtMS || s.WindowActivityMS > r.StartedAtMS+5000)
		}
		out = append(out, s)
	}
	return out, nil
}

// transcriptMtime is the newest modification time of the session's
// transcript, in ms, or 0.
func (c *Config) transcriptMtime(r *record) int64 {
	if r.TranscriptPath != "" {
		if fi, err := os.Stat(r.TranscriptPath); err == nil {
			return fi.ModTime().UnixMilli()
		}
	}
	dir := agentwire.KindOf(r.CLI).TranscriptDir(c.Home, r.Dir)
	if dir == "" {
		return 0
	}
	var newest int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().UnixMilli() > newest {
			newest = fi.ModTime().UnixMilli()
		}
		return nil
	})
	return newest
}
