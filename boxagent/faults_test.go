package boxagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// faultInbox is an inbox on a temporary box with one started session of
// kind in dir, whose tmux server (none) answers nothing: its panes
// hold no CLI, and queued messages stay queued.
func faultInbox(t *testing.T, kind, dir string) (*Inbox, *Config) {
	t.Helper()
	tmp := t.TempDir()
	cfg := &Config{Home: filepath.Join(tmp, "home"), Workspace: filepath.Join(tmp, "ws"), RunDir: filepath.Join(tmp, "run"), Shell: "/bin/sh",
		Environ: append(os.Environ(), "TMUX_TMPDIR="+filepath.Join(tmp, "tmux"))}
	r := &record{Repo: "k1", Name: "app", Dir: dir, CLI: kind, OffloadID: "o1", Started: true, Status: StatusWorking,
		StartedAtMS: 1, InboxSeq: 1, TurnSeq: 1, TurnAtMS: 1}
	if err := cfg.writeRecord(r); err != nil {
		t.Fatal(err)
	}
	return NewInbox(cfg), cfg
}

func recorded(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"..", "agentwire", "testdata", "failures"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func faultEntries(t *testing.T, cfg *Config) []agentwire.Entry {
	t.Helper()
	es, err := cfg.readOutbox("k1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []agentwire.Entry
	for _, e := range es {
		if e.Kind == agentwire.EntryFault {
			out = append(out, e)
		}
	}
	return out
}

// Claude's StopFailure (its recorded payload) leaves the session idle
// with the failed turn's fault and one outbox entry, however often the
// hook comes; the next turn's prompt hook clears the fault, and a BACK
// queued meanwhile stays queued while no CLI holds the pane.
func TestStopFailureFault(t *testing.T) {
	ib, cfg := faultInbox(t, "claude", "/workspace/app")
	payload := recorded(t, "claude", "refuse", "StopFailure.json")
	for range 2 {
		if _, err := ib.event(Request{Op: "event", Repo: "k1", CLI: "claude", Hook: "StopFailure", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := cfg.readRecord("k1")
	if r.Status != StatusIdle || r.Fault == nil || r.Fault.Kind != agentwire.FaultTurn || r.Fault.Turn != 1 ||
		r.Fault.Line != "API Error: Unable to connect to API (ConnectionRefused)" {
		t.Fatalf("after StopFailure: status %s, fault %+v", r.Status, r.Fault)
	}
	es := faultEntries(t, cfg)
	if len(es) != 1 || es[0].Body != "last turn failed: API Error: Unable to connect to API (ConnectionRefused)" || es[0].OffloadID != "o1" {
		t.Fatalf("outbox fault entries: %+v", es)
	}
	ss, _ := cfg.sessions("k1")
	if len(ss) != 1 || ss[0].Status != StatusIdle || ss[0].Fault == nil || ss[0].Fault.AgeMS < 0 {
		t.Errorf("status: %+v", ss)
	}
	if _, err := ib.event(Request{Op: "event", Repo: "k1", CLI: "claude", Hook: "UserPromptSubmit", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if r, _ := cfg.readRecord("k1"); r.Fault != nil || r.Status != StatusWorking {
		t.Errorf("a new turn keeps %+v (%s)", r.Fault, r.Status)
	}
	// A Stop of a turn that ended well clears nothing new and posts nothing.
	ib.event(Request{Op: "event", Repo: "k1", CLI: "claude", Hook: "Stop", Payload: []byte(`{}`)})
	if len(faultEntries(t, cfg)) != 1 {
		t.Error("a turn that ended well posted a fault")
	}
}

// Codex runs no hook for a failed turn: the pane watcher reads its
// session log (the recorded rollout of a 401), ends the turn with the
// fault once, and ignores a failure the log dates before the prompt.
func TestCodexLogFault(t *testing.T) {
	ib, cfg := faultInbox(t, "codex", "/tmp/exphome/x-s401")
	day := filepath.Join(cfg.Home, ".codex", "sessions", "2026", "12", "02")
	os.MkdirAll(day, 0o700)
	os.WriteFile(filepath.Join(day, "rollout-other.jsonl"), recorded(t, "codex", "500", "rollout.jsonl"), 0o600)
	os.WriteFile(filepath.Join(day, "rollout-x.jsonl"), recorded(t, "codex", "401", "rollout.jsonl"), 0o600)
	check := func() {
		t.Helper()
		cfg.update("k1", func(r *record) (*record, error) {
			ib.checkFaults(r, LogSearchEvery, paneNotYet)
			return r, nil
		})
	}
	// The prompt came after the failure: an earlier turn's.
	cfg.update("k1", func(r *record) (*record, error) { r.TurnAtMS = nowMS(); return r, nil })
	check()
	if r, _ := cfg.readRecord("k1"); r.Fault != nil || r.Status != StatusWorking || filepath.Base(r.TranscriptPath) != "rollout-x.jsonl" {
		t.Fatalf("an earlier failure counted: %+v, %s, log %s", r.Fault, r.Status, r.TranscriptPath)
	}
	cfg.update("k1", func(r *record) (*record, error) {
		r.TurnAtMS = 1
		r.Queue = []queued{{Seq: 2, Back: true, Body: "BACK"}}
		return r, nil
	})
	ib.logSeen = map[string]string{}
	check()
	check()
	r, _ := cfg.readRecord("k1")
	if r.Status != StatusIdle || r.Fault == nil || !strings.HasPrefix(r.Fault.Line, "unexpected status 401 Unauthorized: Incorrect API key provided") || len(r.Queue) != 1 {
		t.Fatalf("after the watcher: status %s, fault %+v, queue %d", r.Status, r.Fault, len(r.Queue))
	}
	if es := faultEntries(t, cfg); len(es) != 1 {
		t.Errorf("fault entries: %+v", es)
	}
}

func TestExitLine(t *testing.T) {
	for _, tt := range []struct {
		lines []string
		want  string
	}{
		{[]string{"user@vm:/w/app$ claude --x \"$(cat p)\"; cocoonbox-agent offload event --repo k --cli claude --hook exit </dev/null", "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons", "root@vm:/w/app#"}, "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"},
		{[]string{"Killed", "user@vm:~$ "}, "Killed"},
		{[]string{"user@vm:~$"}, "Codex CLI exited"},
		{nil, "Codex CLI exited"},
	} {
		if got := exitLine("Codex CLI", tt.lines); got != tt.want {
			t.Errorf("exitLine(%q) = %q, want %q", tt.lines, got, tt.want)
		}
	}
}

// A read that finds a fault's outbox entry answers with the record the
// same update wrote: it waits while the update holds the repo's lock
// (an offload inbox --wait once printed the entry beside "working").
func TestReadSeesFaultWithItsEntry(t *testing.T) {
	ib, cfg := faultInbox(t, "claude", "/workspace/app")
	appended, release := make(chan struct{}), make(chan struct{})
	go cfg.update("k1", func(r *record) (*record, error) {
		r.Status = StatusIdle
		if _, err := cfg.setFault(r, agentwire.FaultTurn, "API Error: 500"); err != nil {
			t.Error(err)
		}
		close(appended)
		<-release
		return r, nil
	})
	<-appended
	got := make(chan *Response, 1)
	go func() {
		resp, err := ib.read(t.Context(), Request{Op: "read", Repo: "k1"})
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	// The read, left to run while the update holds the lock, must not
	// answer before the record is written.
	select {
	case resp := <-got:
		t.Fatalf("read answered during the update: status %s, fault %+v", resp.Status, resp.Fault)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	resp := <-got
	if len(resp.Entries) != 1 || resp.Fault == nil || resp.Status != StatusIdle {
		t.Fatalf("read: entries %+v, status %s, fault %+v", resp.Entries, resp.Status, resp.Fault)
	}
}
