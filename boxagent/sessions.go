package boxagent

// The sessions' lives: start, a message or BACK sent, restart.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

func (ib *Inbox) handoverOut(k string) string { return filepath.Join(ib.cfg.repoDir(k), "handover.md") }

// send stores a message, or BACK, for the repo's running session and
// delivers it: pasted when the session is at its prompt (or interrupt),
// else queued until its next idle. A session whose CLI has exited (it
// crashed, or codex, which has no SessionEnd hook, quit) is marked stopped
// and the message refused; one whose CLI has not started yet gets it
// queued.
func (ib *Inbox) send(req Request) (*Response, error) {
	var resp Response
	var exited *record
	var faultLine *WatchLine
	err := ib.change(req.Repo, func(r *record) (*record, error) {
		if !r.running() {
			return nil, refusedf("no running session of %s in this box", req.Repo)
		}
		session := SessionName(r.Repo, r.CLI)
		if !ib.cfg.tmuxAlive(session) {
			return nil, refusedf("the session of %s has no tmux session; restart it with: cocoonbox-agent offload restart --repo %s", req.Repo, req.Repo)
		}
		pane := ib.cfg.checkPane(r)
		if pane == paneExited {
			faultLine = ib.cfg.markExited(r)
			exited = r
			return r, nil
		}
		kind, body := "message", req.Body
		if req.Back {
			kind, body = "back", backInstruction(ib.handoverOut(r.Repo), req.Body)
			r.Queue = slices.DeleteFunc(r.Queue, func(q queued) bool { return q.Back })
		}
		r.InboxSeq++
		resp.Seq = r.InboxSeq
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
			newTurn(r, resp.Seq)
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
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	ib.notify(faultLine)
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
	// The session is the inbox's now: the send that asked for it (its
	// journal's last step, start) has nothing left to undo.
	r.Started, r.Status, r.Question, r.Queue, r.Step = true, StatusWorking, false, nil, ""
	r.StartedAtMS, r.HookAtMS, r.TranscriptPath, r.CLIPid, r.ExitLines, r.Thread = nowMS(), 0, "", 0, nil, ""
	r.InboxSeq++
	r.Fault, r.Ending = nil, false
	newTurn(r, r.InboxSeq)
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
		fmt.Fprintf(&b, "PATH=%s:\"$PATH\" ", shellquote.Quote(filepath.Dir(c.Self)))
	}
	k := agentwire.KindOf(r.CLI)
	if k.Unsupported() != "" {
		return "", refusedf("%s sessions are not supported by this box's agent", r.CLI)
	}
	settings := filepath.Join(c.repoDir(r.Repo), "hooks.json")
	line, hooks := k.Launch(agentwire.Launch{Agent: self, Repo: r.Repo, PromptPath: promptPath, SettingsPath: settings, Quote: shellquote.Quote})
	if hooks != nil {
		if err := os.WriteFile(settings, hooks, 0o600); err != nil {
			return "", err
		}
	}
	b.WriteString(line)
	// After the CLI, however it ended, the login shell tells the inbox.
	agent := self
	if !ib.selfOnLoginPATH() {
		agent = shellquote.Quote(c.Self)
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
