package agentwire

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fixtures under testdata/failures are recorded from the real CLIs
// (claude 2.1.197, codex 0.171.0) run in tmux as an unprivileged user on
// this project's scripted model endpoint (internal/modeltest) made to
// refuse connections or answer 500, 529 and 401 (SetFault), each with
// its retries off (CLAUDE_CODE_MAX_RETRIES=0; codex's provider
// request_max_retries = 0, stream_max_retries = 0): the hook's payload
// as the hook command read it on stdin, the session log the CLI wrote,
// and the pane (tmux capture-pane) once the turn ended; testdata/failures/README
// says more.

func fixture(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata", "failures"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClaudeReadFailure(t *testing.T) {
	k := KindOf("claude")
	for _, tt := range []struct{ dir, want string }{
		{"refuse", "API Error: Unable to connect to API (ConnectionRefused)"},
		{"500", "API Error: 500 Internal server error. This is a server-side issue"},
		{"529", "API Error: 529 Overloaded."},
		{"401", "Invalid API key · Fix external API key"},
		{"signedout", "Not logged in · Please run /login"},
	} {
		payload, log := fixture(t, "claude", tt.dir, "StopFailure.json"), fixture(t, "claude", tt.dir, "transcript.jsonl")
		line, _, ok := k.ReadFailure("StopFailure", payload, log)
		if !ok || !strings.HasPrefix(line, tt.want) {
			t.Errorf("%s: the hook's failure is %q (%v), want %q...", tt.dir, line, ok, tt.want)
		}
		// Without the payload's text, the transcript says the same.
		if line2, _, ok := k.ReadFailure("StopFailure", []byte(`{"error":"server_error"}`), log); !ok || line2 != line {
			t.Errorf("%s: from the transcript %q, want %q", tt.dir, line2, line)
		}
		// The transcript alone, as the box reads it when hooks are silent.
		line3, at, ok := k.ReadFailure("", nil, log)
		if !ok || line3 != line || at < time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() {
			t.Errorf("%s: the transcript's failure is %q at %d (%v), want %q", tt.dir, line3, at, ok, line)
		}
		// The tail of a big transcript starts mid-line.
		if line4, _, ok := k.ReadFailure("", nil, log[len(log)/2:]); !ok || line4 != line {
			t.Errorf("%s: from the tail %q, want %q", tt.dir, line4, line)
		}
	}
	if line, _, ok := k.ReadFailure("", nil, fixture(t, "claude", "ok", "transcript.jsonl")); ok {
		t.Errorf("a turn that ended well read as failed: %q", line)
	}
	if line, _, ok := k.ReadFailure("Stop", fixture(t, "claude", "ok", "Stop.json"), nil); ok {
		t.Errorf("Stop read as a failure: %q", line)
	}
	if line, _, ok := k.ReadFailure("StopFailure", []byte(`{"error":"rate_limit"}`), nil); !ok || line != "API error (rate_limit)" {
		t.Errorf("a payload that names only the error: %q", line)
	}
}

func TestCodexReadFailure(t *testing.T) {
	k := KindOf("codex")
	for _, tt := range []struct{ dir, want string }{
		{"500", "We’re currently experiencing high demand, which may cause temporary errors. (internal_server_error)"},
		{"529", "unexpected status 529 <unknown status code>: The engine is currently overloaded"},
		{"401", "unexpected status 401 Unauthorized: Incorrect API key provided"},
	} {
		log := fixture(t, "codex", tt.dir, "rollout.jsonl")
		line, at, ok := k.ReadFailure("", nil, log)
		if !ok || !strings.HasPrefix(line, tt.want) || at == 0 {
			t.Errorf("%s: %q at %d (%v), want %q...", tt.dir, line, at, ok, tt.want)
		}
		if !k.OwnsLog(firstLine(log), "/tmp/exphome/x-s"+tt.dir) && !k.OwnsLog(firstLine(log), "/tmp/exphome/x-s"+tt.dir+"b") {
			t.Errorf("%s: the log's session_meta does not name its directory", tt.dir)
		}
		if k.OwnsLog(firstLine(log), "/elsewhere") {
			t.Errorf("%s: the log is owned by any directory", tt.dir)
		}
		// A turn started after the failed one: no failure now.
		more := append(append([]byte{}, log...), []byte(`{"timestamp":"2026-12-02T03:20:00.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"x"}}`+"\n")...)
		if line, _, ok := k.ReadFailure("", nil, more); ok {
			t.Errorf("%s: a turn under way read as failed: %q", tt.dir, line)
		}
	}
	for _, dir := range []string{"ok", "refuse"} {
		if line, _, ok := k.ReadFailure("", nil, fixture(t, "codex", dir, "rollout.jsonl")); ok {
			t.Errorf("%s: read as a failed turn: %q", dir, line)
		}
	}
}

func firstLine(b []byte) []byte {
	l, _, _ := strings.Cut(string(b), "\n")
	return []byte(l)
}

func lines(b []byte) []string { return strings.Split(string(b), "\n") }

func TestReadScreen(t *testing.T) {
	for _, tt := range []struct {
		kind, file, want, line string
	}{
		{"claude", "screens/claude-trust.txt", FaultDialog, "Quick safety check: Is this a project you created or one you trust?"},
		{"claude", "screens/claude-apikey.txt", FaultDialog, "Detected a custom API key in your environment"},
		{"codex", "screens/codex-trust.txt", FaultDialog, "Trust this folder?"},
		{"codex", "screens/codex-login.txt", FaultLogin, "1. Sign in with ChatGPT"},
		{"codex", "codex/refuse/pane.txt", FaultStalled, "Connection failed: error sending request"},
		{"claude", "screens/claude-retry-refuse.txt", FaultRetrying, "Unable to connect to API (ConnectionRefused)"},
		{"claude", "screens/claude-retry-529.txt", FaultRetrying, "API error"},
		{"codex", "screens/codex-retry-500.txt", FaultRetrying, "We’re currently experiencing high demand, which may cause temporary errors."},
		// Panes at the prompt after a turn, failed or not, wait for no one.
		{"claude", "claude/refuse/pane.txt", "", ""},
		{"claude", "claude/signedout/pane.txt", "", ""},
		{"claude", "claude/ok/pane.txt", "", ""},
		{"claude", "screens/claude-offline-exit.txt", "", ""},
		{"codex", "codex/401/pane.txt", "", ""},
		{"codex", "codex/ok/pane.txt", "", ""},
	} {
		kind, line := KindOf(tt.kind).ReadScreen(lines(fixture(t, strings.Split(tt.file, "/")...)))
		if kind != tt.want || !strings.HasPrefix(line, tt.line) {
			t.Errorf("%s: %q %q, want %q %q...", tt.file, kind, line, tt.want, tt.line)
		}
	}
	// Claude Code 2.1.337's retry line, as a user's pane showed it: the
	// countdown's word in lower case.
	if k, l := KindOf("claude").ReadScreen([]string{"❯ go on", "", "✻ Can't reach the API server — check your internet or DNS (ENOTFOUND) · retrying in 5s · attempt 7/10"}); k != FaultRetrying || l != "Can't reach the API server — check your internet or DNS (ENOTFOUND)" {
		t.Errorf("claude 2.1.337's retry line: %q %q", k, l)
	}
	if k, l := KindOf("claude").ReadScreen([]string{"Select login method:", " ❯ 1. Claude account with subscription"}); k != FaultLogin || l != "Select login method:" {
		t.Errorf("claude's sign-in screen: %q %q", k, l)
	}
}

func TestFaultText(t *testing.T) {
	f := &Fault{Kind: FaultTurn, Line: "API Error: Unable to connect to API (ConnectionRefused)", AgeMS: 40_500}
	if got, want := f.Ago(), "last turn failed 40 s ago: API Error: Unable to connect to API (ConnectionRefused)"; got != want {
		t.Errorf("Ago: %q, want %q", got, want)
	}
	if got := f.Summary(); got != "last turn failed: API Error: Unable to connect to API (ConnectionRefused)" {
		t.Errorf("Summary: %q", got)
	}
	if got := (&Fault{Kind: FaultRetrying, Line: "API error", AgeMS: 20_000}).Ago(); got != "retrying for 20 s: API error" {
		t.Errorf("a retry's Ago: %q", got)
	}
	for d, want := range map[time.Duration]string{-time.Second: "0 s", 90 * time.Second: "90 s", 5 * time.Minute: "5 min", 3 * time.Hour: "3 h", 72 * time.Hour: "3 d"} {
		if got := Age(d); got != want {
			t.Errorf("Age(%v) = %q, want %q", d, got, want)
		}
	}
	if !(&Fault{Kind: FaultStalled}).Waits() || (&Fault{Kind: FaultTurn}).Waits() || (*Fault)(nil).Waits() || (&Fault{Kind: FaultRetrying}).Waits() {
		t.Error("Waits")
	}
	if !(&Fault{Kind: FaultRetrying}).OnScreen() || !(&Fault{Kind: FaultDialog}).OnScreen() || (&Fault{Kind: FaultExited}).OnScreen() || (*Fault)(nil).OnScreen() {
		t.Error("OnScreen")
	}
}
