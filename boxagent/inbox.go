package boxagent

import (
	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/handover"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"

	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Inbox is the box's offload inbox: it owns the box CLI sessions and
// serves the ops of the contract's "Inbox" table on a unix socket, one
// JSON object per line.
type Inbox struct {
	cfg *Config

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	watchers map[chan []byte]struct{}
	envRuns  map[string]bool // repo keys whose environment step runs here
	// startMu serialises session starts, so the session count holds.
	startMu sync.Mutex

	pathOnce   sync.Once
	selfOnPATH bool
}

// NewInbox returns an inbox for cfg; Serve runs it.
func NewInbox(cfg *Config) *Inbox {
	return &Inbox{cfg: cfg, changed: make(chan struct{}), watchers: map[chan []byte]struct{}{}, envRuns: map[string]bool{}}
}

// Listen makes the inbox's socket: the directory 0700, the socket 0600,
// at any length of path.
// A socket another inbox answers on is refused; a stale one is replaced.
func (ib *Inbox) Listen() (net.Listener, error) {
	p := ib.cfg.SocketPath()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	if conn, err := unixsock.Dial(p); err == nil {
		conn.Close()
		return nil, fmt.Errorf("an inbox already listens on %s", p)
	}
	os.Remove(p)
	// A path longer than a socket address holds is bound through a short
	// name (internal/unixsock).
	lis, err := unixsock.Listen(p)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(p, 0o600); err != nil {
		lis.Close()
		return nil, err
	}
	return lis, nil
}

// PaneCheckEvery is how often the inbox looks for a session whose CLI has
// exited.
const PaneCheckEvery = time.Second

// Serve runs the restart check, then answers connections on lis until ctx
// ends.
func (ib *Inbox) Serve(ctx context.Context, lis net.Listener) error {
	ib.restartCheck()
	go ib.watchPanes(ctx, PaneCheckEvery)
	go func() {
		<-ctx.Done()
		lis.Close()
	}()
	for {
		conn, err := lis.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go ib.handle(ctx, conn)
	}
}

func (ib *Inbox) handle(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			writeJSON(conn, Response{Code: inboxInvalid, Error: "not a JSON object: " + err.Error()})
			continue
		}
		if req.Op == "watch" {
			ib.watch(ctx, conn)
			return
		}
		resp, err := ib.do(ctx, req)
		if err != nil {
			code := inboxFailed
			if e, ok := errors.AsType[*Error](err); ok {
				switch e.Code {
				case agentwire.CodeUsage:
					code = inboxInvalid
				case agentwire.CodeRefused:
					code = inboxRefused
				}
			}
			resp = &Response{Code: code, Error: err.Error()}
		} else {
			resp.OK = true
		}
		if writeJSON(conn, resp) != nil {
			return
		}
	}
}

func writeJSON(conn net.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = conn.Write(append(b, '\n'))
	return err
}

func (ib *Inbox) do(ctx context.Context, req Request) (*Response, error) {
	if req.Op != "status" && req.Op != "rescan" {
		if !ValidRepoKey(req.Repo) {
			return nil, usagef("bad or missing repo key %q", req.Repo)
		}
	} else if req.Repo != "" && !ValidRepoKey(req.Repo) {
		return nil, usagef("bad repo key %q", req.Repo)
	}
	switch req.Op {
	case "send":
		if req.Start {
			return ib.start(req)
		}
		return ib.send(req)
	case "post":
		return ib.post(req)
	case "read":
		return ib.read(ctx, req)
	case "env":
		return ib.env(ctx, req)
	case "status":
		s, err := ib.sessions(req.Repo)
		return &Response{Sessions: s}, err
	case "restart":
		return ib.restart(req.Repo)
	case "event":
		return ib.event(req)
	case "rescan":
		ib.restartCheck()
		ib.notify(nil)
		return &Response{}, nil
	}
	return nil, usagef("unknown op %q", req.Op)
}

// notify wakes every long poll, and sends line to the watchers.
func (ib *Inbox) notify(line *WatchLine) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	close(ib.changed)
	ib.changed = make(chan struct{})
	if line == nil {
		return
	}
	b, _ := json.Marshal(line)
	b = append(b, '\n')
	for w := range ib.watchers {
		select {
		case w <- b:
		default: // a watcher that does not read loses lines, never blocks us
		}
	}
}

func (ib *Inbox) changes() <-chan struct{} {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.changed
}

func statusLine(r *record) *WatchLine {
	return &WatchLine{Repo: r.Repo, Name: r.Name, CLI: r.CLI, OffloadID: r.OffloadID, Status: r.Status}
}

func (ib *Inbox) watch(ctx context.Context, conn net.Conn) {
	w := make(chan []byte, 256)
	ib.mu.Lock()
	ib.watchers[w] = struct{}{}
	ib.mu.Unlock()
	defer func() {
		ib.mu.Lock()
		delete(ib.watchers, w)
		ib.mu.Unlock()
	}()
	closed := make(chan struct{})
	go func() {
		// The peer sends nothing more; a read ends when it goes.
		buf := make([]byte, 1)
		conn.Read(buf)
		close(closed)
	}()
	for {
		select {
		case b := <-w:
			if _, err := conn.Write(b); err != nil {
				return
			}
		case <-closed:
			return
		case <-ctx.Done():
			return
		}
	}
}

// atPrompt reports whether a session with status st takes a paste now.
func atPrompt(st string) bool {
	return st == StatusIdle || st == StatusBlocked || st == StatusWaiting
}

func (ib *Inbox) handoverOut(k string) string { return filepath.Join(ib.cfg.repoDir(k), "handover.md") }

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
// keeps the pane's last lines (what the CLI said as it went).
func (c *Config) markExited(r *record) {
	c.logf("the %s session of %s has exited: marked stopped", r.CLI, r.Repo)
	r.Status, r.Question, r.Queue = StatusStopped, false, nil
	r.ExitLines = c.tmuxLastLines(SessionName(r.Repo, r.CLI), exitLines)
}

// exitLines is how many of the pane's last lines an exited session keeps.
const exitLines = 8

// watchPanes looks at every running session's pane each interval until
// ctx ends: a session whose tmux session is gone, or whose CLI no longer
// holds its pane's terminal after it was seen there, has exited (a crash,
// a kill, a CLI that quit without a hook) and is marked stopped, so that
// status, send, read and back say so within seconds.
func (ib *Inbox) watchPanes(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
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
			var line *WatchLine
			ib.cfg.update(r0.Repo, func(r *record) (*record, error) {
				if r == nil || !r.running() || r.CLI != r0.CLI || r.StartedAtMS != r0.StartedAtMS {
					return nil, nil
				}
				session := SessionName(r.Repo, r.CLI)
				if !ib.cfg.tmuxAlive(session) {
					ib.cfg.logf("the tmux session %s is gone: marked stopped", session)
					r.Status, r.Question, r.Queue = StatusStopped, false, nil
				} else if before := r.CLIPid; ib.cfg.checkPane(r) == paneExited {
					ib.cfg.markExited(r)
				} else if r.CLIPid == before {
					return nil, nil
				}
				line = statusLine(r)
				if r.Status != StatusStopped {
					line = nil
				}
				return r, nil
			})
			ib.notify(line)
		}
	}
}

// send stores a message, or BACK, for the repo's running session and
// delivers it: pasted when the session is at its prompt (or interrupt),
// else queued until its next idle. A session whose CLI has exited (it
// crashed, or codex, which has no SessionEnd hook, quit) is marked stopped
// and the message refused; one whose CLI has not started yet gets it
// queued.
func (ib *Inbox) send(req Request) (*Response, error) {
	var resp Response
	var line *WatchLine
	var exited *record
	_, err := ib.cfg.update(req.Repo, func(r *record) (*record, error) {
		if !r.running() {
			return nil, refusedf("no running session of %s in this box", req.Repo)
		}
		session := SessionName(r.Repo, r.CLI)
		if !ib.cfg.tmuxAlive(session) {
			return nil, refusedf("the session of %s has no tmux session; restart it with: cocoonbox-agent offload restart --repo %s", req.Repo, req.Repo)
		}
		pane := ib.cfg.checkPane(r)
		if pane == paneExited {
			ib.cfg.markExited(r)
			exited, line = r, statusLine(r)
			return r, nil
		}
		kind, body := "message", req.Body
		if req.Back {
			kind, body = "back", backInstruction(ib.handoverOut(r.Repo), req.Body)
			r.Queue = slices.DeleteFunc(r.Queue, func(q queued) bool { return q.Back })
		}
		r.InboxSeq++
		resp.Seq = r.InboxSeq
		before := r.Status
		switch {
		case pane == paneCLI && (req.Interrupt || (atPrompt(r.Status) && len(r.Queue) == 0)):
			// At its prompt, the CLI gets the Enter as soon as it shows the
			// paste; in a hook of its own it is still in its turn, where
			// claude 2.1.197 took a quick Enter into the message after it as
			// well, so the Enter waits pasteSettle there. After an Esc the
			// pane changes for the interrupt itself.
			watch := !req.Interrupt && !inHook(r.CLIPid)
			if err := ib.cfg.tmuxPaste(session, body, req.Interrupt, watch); err != nil {
				return nil, failedf("deliver to %s: %v", session, err)
			}
			ib.confirmPaste(r, nowMS())
			r.Status, r.Question = StatusWorking, false
			resp.Delivery = "pasted"
		case req.Back:
			r.Queue = append([]queued{{Seq: r.InboxSeq, Back: true, Body: body}}, r.Queue...)
			resp.Delivery = "queued"
		default:
			r.Queue = append(r.Queue, queued{Seq: r.InboxSeq, Body: body})
			resp.Delivery = "queued"
		}
		if err := appendLine(ib.cfg.inboxPath(r.Repo), map[string]any{
			"seq": r.InboxSeq, "kind": kind, "offload_id": r.OffloadID, "time_ms": nowMS(), "body": body, "delivery": resp.Delivery,
		}); err != nil {
			return nil, err
		}
		if r.Status != before {
			line = statusLine(r)
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	ib.notify(line)
	if exited != nil {
		return nil, refusedf("the %s session of %s has exited; restart it with: cocoonbox-agent offload restart --repo %s", exited.CLI, exited.Repo, exited.Repo)
	}
	return &resp, nil
}

// start starts a fresh CLI session with req.Body as its first prompt, or
// with Prepare only the environment step.
func (ib *Inbox) start(req Request) (*Response, error) {
	if err := checkKind(req.CLI); err != nil {
		return nil, err
	}
	ib.startMu.Lock()
	defer ib.startMu.Unlock()
	var resp Response
	var rec *record
	_, err := ib.cfg.update(req.Repo, func(r *record) (*record, error) {
		if r == nil {
			return nil, refusedf("no copy of %s in this box; run begin first", req.Repo)
		}
		if r.OffloadID != req.OffloadID {
			return nil, refusedf("the copy of %s is not taken for offload %s; run begin first", req.Repo, req.OffloadID)
		}
		if req.Prepare {
			rec = r
			return nil, nil
		}
		if r.running() && ib.cfg.tmuxAlive(SessionName(r.Repo, r.CLI)) {
			return nil, refusedf("a session of %s runs in this box", req.Repo)
		}
		if err := ib.checkCount(r.Repo); err != nil {
			return nil, err
		}
		r.CLI = req.CLI
		if err := ib.startSession(r, req.Body); err != nil {
			return nil, err
		}
		resp.Seq = r.InboxSeq
		rec = r
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	resp.Delivery = "started"
	ib.startEnv(rec)
	if !req.Prepare {
		ib.notify(statusLine(rec))
	}
	return &resp, nil
}

// checkCount refuses a start when MaxSessions sessions of other repos are
// not stopped.
func (ib *Inbox) checkCount(except string) error {
	recs, err := ib.cfg.records()
	if err != nil {
		return err
	}
	n := 0
	for _, o := range recs {
		if o.Repo != except && o.running() {
			n++
		}
	}
	if n >= MaxSessions {
		return refusedf("%d sessions of this box are not stopped; end one first (cocoonbox-agent offload end --repo K)", n)
	}
	return nil
}

// startSession writes the prompt and hooks, starts the CLI in tmux and
// marks r started; r is written by the caller.
func (ib *Inbox) startSession(r *record, prompt string) error {
	c := ib.cfg
	dir := c.repoDir(r.Repo)
	promptPath := filepath.Join(dir, "prompt.md")
	if err := os.WriteFile(promptPath, []byte(prompt), 0o600); err != nil {
		return err
	}
	line, err := ib.commandLine(r, promptPath)
	if err != nil {
		return err
	}
	env, err := ib.sessionEnv(r)
	if err != nil {
		return err
	}
	session := SessionName(r.Repo, r.CLI)
	c.logf("starting %s in tmux session %s", r.CLI, session)
	if err := c.tmuxStart(session, r.Dir, env, line); err != nil {
		return failedf("start the %s session: %v", r.CLI, err)
	}
	r.Started, r.Status, r.Question, r.Queue = true, StatusWorking, false, nil
	r.StartedAtMS, r.HookAtMS, r.TranscriptPath, r.CLIPid, r.ExitLines, r.CodexThread = nowMS(), 0, "", 0, nil, ""
	r.InboxSeq++
	return appendLine(c.inboxPath(r.Repo), map[string]any{
		"seq": r.InboxSeq, "kind": "start", "offload_id": r.OffloadID, "time_ms": nowMS(), "body": prompt, "delivery": "started",
	})
}

// commandLine is what is typed into the session's login shell.
func (ib *Inbox) commandLine(r *record, promptPath string) (string, error) {
	c := ib.cfg
	self := "cocoonbox-agent"
	var b strings.Builder
	if !ib.selfOnLoginPATH() {
		// The login shell's profile may reset PATH; the CLI's hooks and the
		// agent's own commands need cocoonbox-agent on it.
		fmt.Fprintf(&b, "PATH=%s:\"$PATH\" ", shellQuote(filepath.Dir(c.Self)))
	}
	k := agentwire.KindOf(r.CLI)
	if k.Unsupported() != "" {
		return "", refusedf("%s sessions are not supported by this box's agent", r.CLI)
	}
	settings := filepath.Join(c.repoDir(r.Repo), "hooks.json")
	line, hooks := k.Launch(agentwire.Launch{Agent: self, Repo: r.Repo, PromptPath: promptPath, SettingsPath: settings, Quote: shellQuote})
	if hooks != nil {
		if err := os.WriteFile(settings, hooks, 0o600); err != nil {
			return "", err
		}
	}
	b.WriteString(line)
	// After the CLI, however it ended, the login shell tells the inbox.
	agent := self
	if !ib.selfOnLoginPATH() {
		agent = shellQuote(c.Self)
	}
	fmt.Fprintf(&b, "; %s </dev/null >/dev/null 2>&1", agentwire.EventLine(agent, r.Repo, r.CLI, "exit"))
	return b.String(), nil
}

func (ib *Inbox) selfOnLoginPATH() bool {
	ib.pathOnce.Do(func() {
		out, err := ib.cfg.loginShell(10*time.Second, "", "command -v cocoonbox-agent")
		ib.selfOnPATH = err == nil && strings.TrimSpace(out) != ""
	})
	return ib.selfOnPATH
}

// sessionEnv is the tmux environment: the repo key, the mise pins and the
// secrets' variables (paths, never values).
func (ib *Inbox) sessionEnv(r *record) ([]string, error) {
	env := []string{"COCOONBOX_OFFLOAD_REPO=" + r.Repo}
	if e, err := ib.cfg.readEnvFile(r.Repo); err == nil && e != nil {
		for _, m := range []map[string]string{e.Tools, e.PackageManagers} {
			for tool, v := range m {
				env = append(env, misePin(tool)+"="+v)
			}
		}
	}
	env = append(env, secretVars(ib.cfg.SecretsDir(r.Repo), r.Secrets)...)
	sort.Strings(env[1:])
	return env, nil
}

// secretVars are the variables that point the box's tools at the placed
// secrets.
func secretVars(dir string, entries []string) []string {
	var out []string
	for _, e := range entries {
		p := filepath.Join(dir, secretFile(e))
		switch e {
		case "aws":
			out = append(out, "AWS_SHARED_CREDENTIALS_FILE="+p)
		case "kube":
			out = append(out, "KUBECONFIG="+p)
		case "gcloud":
			out = append(out, "GOOGLE_APPLICATION_CREDENTIALS="+p)
		}
	}
	return out
}

// misePin is mise's version variable for a tool: MISE_<TOOL>_VERSION.
func misePin(tool string) string {
	up := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, tool)
	return "MISE_" + up + "_VERSION"
}

// event applies a hook's report: the status, then a queued delivery when
// the session came to its prompt.
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
	var line *WatchLine
	_, err := ib.cfg.update(req.Repo, func(r *record) (*record, error) {
		if r == nil || !r.Started || r.CLI != req.CLI {
			return nil, nil // a hook of a session that is over
		}
		hook, known := agentwire.KindOf(r.CLI).Hooks()[req.Hook]
		if hook.Thread && !ib.sessionThread(r, payload.ThreadID, payload.InputMessages) {
			ib.cfg.logf("a notify of another codex thread (%s) is not the session's turn: ignored", payload.ThreadID)
			return nil, nil
		}
		before := r.Status
		pane := ib.cfg.checkPane(r)
		if req.Hook != "exit" {
			r.HookAtMS = nowMS()
		}
		if payload.TranscriptPath != "" && filepath.IsAbs(payload.TranscriptPath) {
			r.TranscriptPath = payload.TranscriptPath
		}
		turnEnd := func() {
			if r.Question {
				r.Status = StatusBlocked
			} else {
				r.Status = StatusIdle
			}
		}
		if !known {
			return nil, usagef("unknown hook %s of %s", req.Hook, req.CLI)
		}
		switch hook.Turn {
		case agentwire.TurnStart:
			r.Status, r.Question = StatusWorking, false
		case agentwire.TurnEnd:
			turnEnd()
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
			ib.cfg.markExited(r)
		}
		if atPrompt(r.Status) && len(r.Queue) > 0 {
			q := r.Queue[0]
			session := SessionName(r.Repo, r.CLI)
			// The CLI is in the hook this answers, so still in its turn:
			// the Enter waits pasteSettle (claude 2.1.197 took a quick one
			// into the next message as well).
			if pane != paneCLI {
				ib.cfg.logf("queued message %d for %s stays queued: its CLI does not hold the terminal", q.Seq, session)
			} else if err := ib.cfg.tmuxPaste(session, q.Body, false, false); err != nil {
				ib.cfg.logf("deliver queued message %d to %s: %v", q.Seq, session, err)
			} else {
				ib.confirmPaste(r, nowMS())
				r.Queue = r.Queue[1:]
				r.Status, r.Question = StatusWorking, false
			}
		}
		if r.Status != before {
			line = statusLine(r)
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	ib.notify(line)
	return &Response{}, nil
}

// sessionThread reports whether a codex notify of thread is the
// session's own turn, learning the session's thread from the first
// notify whose first input is the session's first prompt. codex 0.171
// also notifies for threads of its own (a title for the task, whose input
// quotes the prompt): those are no turn of the session. A notify without
// a thread id is taken as the session's.
func (ib *Inbox) sessionThread(r *record, thread string, inputs []string) bool {
	switch {
	case thread == "" || thread == r.CodexThread:
		return true
	case r.CodexThread != "":
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
	r.CodexThread = thread
	return true
}

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
	deadline := time.Now().Add(time.Duration(req.WaitMS) * time.Millisecond)
	for {
		ch := ib.changes()
		entries, err := ib.cfg.readOutbox(req.Repo, req.Since)
		if err != nil {
			return nil, err
		}
		r, err := ib.cfg.readRecord(req.Repo)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, refusedf("no copy of %s in this box", req.Repo)
		}
		left := time.Until(deadline)
		if len(entries) > 0 || left <= 0 {
			return &Response{Entries: entries, Status: r.Status}, nil
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, failedf("the inbox is stopping")
		}
		t.Stop()
	}
}

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
			ExitLines: r.ExitLines,
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

// restart starts the repo's CLI afresh from its last hand-over.
func (ib *Inbox) restart(k string) (*Response, error) {
	ib.startMu.Lock()
	defer ib.startMu.Unlock()
	var rec *record
	_, err := ib.cfg.update(k, func(r *record) (*record, error) {
		if r == nil || !r.Started {
			return nil, refusedf("no session of %s to restart in this box", k)
		}
		if err := ib.checkCount(r.Repo); err != nil {
			return nil, err
		}
		if err := ib.startSession(r, ib.restartPrompt(r)); err != nil {
			return nil, err
		}
		rec = r
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	ib.notify(statusLine(rec))
	return &Response{Delivery: "started"}, nil
}

// restartPrompt is a first prompt from the last hand-over: the box
// agent's, else the one the session started from.
func (ib *Inbox) restartPrompt(r *record) string {
	c := ib.cfg
	h, err := os.ReadFile(ib.handoverOut(r.Repo))
	if err != nil {
		h, _ = os.ReadFile(filepath.Join(c.repoDir(r.Repo), "handover.sent.md"))
	}
	env, _ := os.ReadFile(filepath.Join(c.repoDir(r.Repo), "env.json"))
	p := promptInput{Dir: r.Dir, HandoverOut: ib.handoverOut(r.Repo), Base: r.Base, Env: env, Handover: h, Restart: true}
	c.attachments(r.Dir, &p)
	return composePrompt(p)
}

// restartCheck restarts, from its last hand-over, every session that is
// not stopped but whose tmux session is gone (the box's processes did not
// survive, as after a restore).
func (ib *Inbox) restartCheck() {
	recs, err := ib.cfg.records()
	if err != nil {
		ib.cfg.logf("restart check: %v", err)
		return
	}
	for _, r := range recs {
		if r.running() && !ib.cfg.tmuxAlive(SessionName(r.Repo, r.CLI)) {
			ib.cfg.logf("restart check: %s's session is gone; restarting it from its last hand-over", r.Repo)
			if _, err := ib.restart(r.Repo); err != nil {
				ib.cfg.logf("restart %s: %v", r.Repo, err)
			}
		}
	}
}
