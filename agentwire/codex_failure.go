package agentwire

import (
	"encoding/json"
	"regexp"
	"strings"
)

// The Codex CLI's failure reading, from what it was seen to leave
// (agentwire/testdata/failures/codex, recorded from codex 0.171.0 on the
// scripted model endpoint refusing connections, answering 500, 529 and
// 401): a failed turn runs no notify; its session log
// (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl, whose first line, the
// session_meta, names the work directory) gets a task_complete event
// with an error {message, codex_error_info}, and the pane shows the
// message after "■". A connection refused is no error there: codex
// shows "Reconnecting... waiting for network" under "Connection failed:
// error sending request" and waits.

// ReadFailure reads the session log: a failure when its last turn event
// is a task_complete with an error. codex's hook (notify) comes only for
// a turn that ended well.
func (codex) ReadFailure(hook string, _, log []byte) (string, int64, bool) {
	if hook != "" {
		return "", 0, false
	}
	var line string
	var at int64
	jsonLines(log, func(l []byte) bool {
		var e struct {
			Timestamp string `json:"timestamp"`
			Type      string `json:"type"`
			Payload   struct {
				Type  string `json:"type"`
				Error *struct {
					Message string          `json:"message"`
					Info    json.RawMessage `json:"codex_error_info"`
				} `json:"error"`
			} `json:"payload"`
		}
		if json.Unmarshal(l, &e) != nil || e.Type != "event_msg" {
			return false
		}
		switch e.Payload.Type {
		case "task_started", "turn_started", "user_message":
			return true
		case "task_complete", "turn_complete", "turn_aborted":
			if er := e.Payload.Error; er != nil && strings.TrimSpace(er.Message) != "" {
				line, at = strings.TrimSpace(er.Message), msOf(e.Timestamp)
				// A message that names no status says little ("We're
				// currently experiencing high demand" for a 500): the
				// error's kind goes with it.
				var info string
				if json.Unmarshal(er.Info, &info) == nil && info != "" && !strings.Contains(line, info) {
					line += " (" + info + ")"
				}
			}
			return true
		}
		return false
	})
	return line, at, line != ""
}

// codexRetryRE matches codex's line of a retry: "Reconnecting... 1/5".
var codexRetryRE = regexp.MustCompile(`Reconnecting\.\.\. [0-9]+/[0-9]+`)

// OwnsLog reads the session_meta line's cwd: every codex session of the
// box logs under ~/.codex/sessions.
func (codex) OwnsLog(head []byte, dir string) bool {
	var m struct {
		Type    string `json:"type"`
		Payload struct {
			Cwd string `json:"cwd"`
		} `json:"payload"`
	}
	return json.Unmarshal(head, &m) == nil && m.Type == "session_meta" && m.Payload.Cwd == dir
}

// ReadScreen knows codex's folder trust dialog, its sign-in screen, its
// wait for the network and its retries ("Reconnecting... 1/5 (5s • esc to
// interrupt)" above the error's message; recorded,
// testdata/failures/screens and codex/refuse/pane.txt).
func (codex) ReadScreen(lines []string) (string, string) {
	if codexRetryRE.MatchString(strings.Join(lines, "\n")) {
		l := "Reconnecting..."
		for i, s := range lines {
			if codexRetryRE.MatchString(s) && i+1 < len(lines) && strings.Contains(lines[i+1], "└") {
				l = strings.TrimLeft(strings.TrimSpace(lines[i+1]), "└ ")
			}
		}
		return FaultRetrying, l
	}
	if screenLine(lines, "Reconnecting... waiting for network") != "" {
		// The wait's own line counts the seconds; the line kept is one
		// that stays as it is while the wait lasts.
		l := "Reconnecting... waiting for network"
		if c := screenLine(lines, "Connection failed"); c != "" {
			l = strings.TrimLeft(c, "└ ") + " (" + l + ")"
		}
		return FaultStalled, l
	}
	if l := screenLine(lines, "Sign in with ChatGPT", "Sign in with Device Code"); l != "" {
		return FaultLogin, strings.TrimLeft(l, "> ")
	}
	if l := screenLine(lines, "Trust this folder?", "Do you trust the contents of this directory"); l != "" {
		return FaultDialog, l
	}
	return "", ""
}

// RefusedRoot: codex has no refusal to run as root.
func (codex) RefusedRoot([]string) bool { return false }
