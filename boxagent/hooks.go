package boxagent

// The CLIs' hooks: each event's report applied to its session.

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// event applies a hook's report: the status, a failed turn's fault, then
// a queued delivery when the session came to its prompt.
func (ib *Inbox) event(req Request) (*Response, error) {
	var payload struct {
		Reason         string   `json:"reason"`
		TranscriptPath string   `json:"transcript_path"`
		ThreadID       string   `json:"thread-id"`
		InputMessages  []string `json:"input-messages"`
	}
	if len(req.Payload) > 0 {
		json.Unmarshal(req.Payload, &payload)
	}
	var lines []*WatchLine
	err := ib.change(req.Repo, func(r *record) (*record, error) {
		if r == nil || !r.Started || r.CLI != req.CLI {
			return nil, nil // a hook of a session that is over
		}
		k := agentwire.KindOf(r.CLI)
		hook, known := k.Hooks()[req.Hook]
		if hook.Thread && !ib.sessionThread(r, payload.ThreadID, payload.InputMessages) {
			ib.cfg.logf("a notify of another codex thread (%s) is not the session's turn: ignored", payload.ThreadID)
			return nil, nil
		}
		pane := ib.cfg.checkPane(r)
		if req.Hook != "exit" {
			r.HookAtMS = nowMS()
		}
		if payload.TranscriptPath != "" && filepath.IsAbs(payload.TranscriptPath) {
			r.TranscriptPath = payload.TranscriptPath
		}
		if !known {
			return nil, usagef("unknown hook %s of %s", req.Hook, req.CLI)
		}
		switch hook.Turn {
		case agentwire.TurnStart:
			r.Status, r.Question = StatusWorking, false
			newTurn(r, r.TurnSeq)
		case agentwire.TurnEnd:
			if hook.Failed {
				var log []byte
				if r.TranscriptPath != "" {
					log = readTail(r.TranscriptPath, LogTail)
				}
				if line, _, ok := k.ReadFailure(req.Hook, req.Payload, log); ok {
					w, err := ib.cfg.setFault(r, agentwire.FaultTurn, line)
					if err != nil {
						return nil, err
					}
					lines = append(lines, w)
				}
			} else if r.Fault != nil && (r.Fault.Kind == agentwire.FaultTurn || r.Fault.Kind == agentwire.FaultRetrying) {
				r.Fault = nil // this turn ended well
			}
			turnEnd(r)
		case agentwire.TurnWaiting:
			if r.Status != StatusBlocked {
				r.Status = StatusWaiting
			}
		case agentwire.TurnSessionEnd:
			if payload.Reason == "clear" {
				return r, nil
			}
			r.Status, r.Queue = StatusStopped, nil
		case agentwire.TurnExited:
			// The login shell ran our line after the CLI: it has exited.
			lines = append(lines, ib.cfg.markExited(r))
		}
		ib.deliverQueued(r, pane)
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		ib.notify(l)
	}
	return &Response{}, nil
}

// turnEnd puts a session whose CLI ended its turn at its prompt: idle, or
// blocked when it asked a question in the turn.
func turnEnd(r *record) {
	if r.Question {
		r.Status = StatusBlocked
	} else {
		r.Status = StatusIdle
	}
}

// deliverQueued hands a session at its prompt its first queued message,
// when its CLI holds the pane (pane): the record says so now (the message
// out of the queue, a turn begun), and the message is typed in the
// background once the CLI has left its hooks (pasteQueued).
func (ib *Inbox) deliverQueued(r *record, pane paneState) {
	if !atPrompt(r.Status) || len(r.Queue) == 0 {
		return
	}
	q := r.Queue[0]
	if pane != paneCLI {
		ib.cfg.logf("queued message %d for %s stays queued: its CLI does not hold the terminal", q.Seq, SessionName(r.Repo, r.CLI))
		return
	}
	r.Queue = r.Queue[1:]
	r.Status, r.Question = StatusWorking, false
	newTurn(r, q.Seq)
	go ib.pasteQueued(record{Repo: r.Repo, CLI: r.CLI, StartedAtMS: r.StartedAtMS, CLIPid: r.CLIPid}, q)
}

// hookWait bounds how long a queued message waits for its CLI to leave
// its hooks; hookPoll is how often it looks.
const (
	hookWait = 30 * time.Second
	hookPoll = 10 * time.Millisecond
)

// pasteQueued types queued message q into the session of s (its repo,
// CLI, start and CLI's pid) once the CLI has left its hooks. The hook
// that found the session at its prompt (Stop) is still running while the
// inbox answers it, so the CLI is still in its turn: claude 2.1.197 took
// a message typed then as one typed while busy, sent it, and sometimes
// kept it at its prompt as well, in front of the next message typed
// (realcli claude_queue: BACK reached the model as the previous message
// followed by BACK, and no post --back came). Typed once the hook is
// over, the message meets the CLI at its prompt, as a message sent to an
// idle session does. A message that cannot be typed goes back to the head
// of the queue, for the next hook.
func (ib *Inbox) pasteQueued(s record, q queued) {
	// Out of the hook is when the CLI has reaped every hook process seen
	// (an exited one is a zombie, without its command line, until then),
	// and has had pasteSettle to come back to its prompt.
	seen := map[int]bool{}
	for deadline := time.Now().Add(hookWait); time.Now().Before(deadline); time.Sleep(hookPoll) {
		ps := hookProcs(s.CLIPid)
		for _, p := range ps {
			seen[p] = true
		}
		if len(ps) == 0 && !slices.ContainsFunc(slices.Collect(maps.Keys(seen)), procExists) {
			break
		}
	}
	time.Sleep(pasteSettle)
	session := SessionName(s.Repo, s.CLI)
	err := errors.New("its CLI does not hold the terminal")
	if pid := ib.cfg.tmuxForeground(session); pid == s.CLIPid {
		err = ib.cfg.tmuxPaste(session, q.Body, false, true)
	}
	if err == nil {
		ib.confirmPaste(&s, nowMS())
		return
	}
	ib.cfg.logf("deliver queued message %d to %s: %v; queued again", q.Seq, session, err)
	ib.change(s.Repo, func(r *record) (*record, error) {
		if !r.running() || r.CLI != s.CLI || r.StartedAtMS != s.StartedAtMS {
			return nil, nil
		}
		if q.Back && slices.ContainsFunc(r.Queue, func(x queued) bool { return x.Back }) {
			return nil, nil // a later BACK replaced it
		}
		r.Queue = append([]queued{q}, r.Queue...)
		if r.Status == StatusWorking && r.TurnSeq == q.Seq {
			r.Status = StatusIdle
		}
		return r, nil
	})
}

// sessionThread reports whether a codex notify of thread is the
// session's own turn, learning the session's thread from the first
// notify whose first input is the session's first prompt. codex 0.171
// also notifies for threads of its own (a title for the task, whose input
// quotes the prompt): those are no turn of the session. A notify without
// a thread id is taken as the session's.
func (ib *Inbox) sessionThread(r *record, thread string, inputs []string) bool {
	switch {
	case thread == "" || thread == r.Thread:
		return true
	case r.Thread != "":
		return false
	}
	prompt, err := os.ReadFile(filepath.Join(ib.cfg.repoDir(r.Repo), "prompt.md"))
	if err != nil || len(inputs) == 0 {
		return false
	}
	head := strings.TrimSpace(string(prompt))
	head = head[:min(len(head), 200)]
	if !strings.HasPrefix(strings.TrimSpace(inputs[0]), head) {
		return false
	}
	r.Thread = thread
	return true
}

// pendingEvents is the file, in a repo's directory, of the hook events
// that found the inbox down (Config.Event), one Request a line, in the
// order they came; the inbox applies them when it is back.
const pendingEvents = "events.pending"

// spoolEvent appends req to its repo's pendingEvents, never through a
// link there (one could point the append at any file its user may write).
func (c *Config) spoolEvent(req Request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(c.repoDir(req.Repo), pendingEvents), os.O_WRONLY|os.O_APPEND|os.O_CREATE|safefile.NoFollow, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// replayEvents applies, in order, the events of repo k that found the
// inbox down, and drops them: the file is renamed first, so that one
// spooled meanwhile waits for the next replay rather than being lost.
func (ib *Inbox) replayEvents(k string) {
	p := filepath.Join(ib.cfg.repoDir(k), pendingEvents)
	taken := p + ".replay"
	if err := os.Rename(p, taken); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			ib.cfg.logf("replay the events of %s: %v", k, err)
		}
		return
	}
	defer os.Remove(taken)
	f, err := os.OpenFile(taken, os.O_RDONLY|safefile.NoFollow, 0)
	if err != nil {
		ib.cfg.logf("replay the events of %s: %v", k, err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var req Request
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.Op != "event" || req.Repo != k {
			continue
		}
		ib.cfg.logf("the %s hook of %s came while the inbox was down: applied now", req.Hook, k)
		if _, err := ib.event(req); err != nil {
			ib.cfg.logf("replay the %s hook of %s: %v", req.Hook, k, err)
		}
	}
}
