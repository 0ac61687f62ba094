package agentwire

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Claude Code's failure reading, from what it was seen to leave
// (agentwire/testdata/failures/claude, recorded from claude 2.1.197 on
// the scripted model endpoint refusing connections, answering 500, 529
// and 401, and signed out): a turn that an API error ended runs the
// StopFailure hook, whose payload names the error (error: server_error,
// authentication_failed, ...) and carries the text the pane shows as
// last_assistant_message ("API Error: Unable to connect to API
// (ConnectionRefused)", "Invalid API key · Fix external API key", "Not
// logged in · Please run /login"); its transcript ends with an assistant
// entry marked isApiErrorMessage holding the same text.

// ReadFailure reads the StopFailure hook's payload, or with hook "" the
// transcript's last entry of the conversation.
func (claude) ReadFailure(hook string, payload, log []byte) (string, int64, bool) {
	if hook == "StopFailure" {
		var p struct {
			Error         string `json:"error"`
			ErrorDetails  string `json:"error_details"`
			LastAssistant string `json:"last_assistant_message"`
		}
		json.Unmarshal(payload, &p)
		for _, s := range []string{p.LastAssistant, claudeLogError(log), p.ErrorDetails} {
			if strings.TrimSpace(s) != "" {
				return s, 0, true
			}
		}
		if p.Error != "" {
			return "API error (" + p.Error + ")", 0, true
		}
		return "the turn ended on an API error", 0, true
	}
	if hook != "" {
		return "", 0, false
	}
	var line string
	var at int64
	jsonLines(log, func(l []byte) bool {
		var e claudeEntry
		if json.Unmarshal(l, &e) != nil || (e.Type != "assistant" && e.Type != "user") {
			return false
		}
		if e.IsAPIErrorMessage {
			line, at = e.text(), msOf(e.Timestamp)
		}
		return true
	})
	return line, at, line != ""
}

// claudeEntry is the part of a transcript line read here.
type claudeEntry struct {
	Type              string `json:"type"`
	Timestamp         string `json:"timestamp"`
	IsAPIErrorMessage bool   `json:"isApiErrorMessage"`
	Message           struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

func (e claudeEntry) text() string {
	var parts []string
	for _, b := range blocksOf(e.Message.Content) {
		if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, strings.TrimSpace(b.Text))
		}
	}
	return strings.Join(parts, " ")
}

// claudeLogError is the text of the transcript's last API error entry,
// or "".
func claudeLogError(log []byte) string {
	line, _, _ := claude{}.ReadFailure("", nil, log)
	return line
}

// blocksOf reads a message's content: a string or a list of blocks.
func blocksOf(raw json.RawMessage) []struct{ Type, Text string } {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []struct{ Type, Text string }{{"text", s}}
	}
	var bs []struct{ Type, Text string }
	json.Unmarshal(raw, &bs)
	return bs
}

// OwnsLog: claude keeps a session's transcripts in a directory of its
// work directory's own (TranscriptDir), so each is the session's.
func (claude) OwnsLog([]byte, string) bool { return true }

// ReadScreen knows claude's dialogs that hold a session: the folder trust
// and the custom API key dialogs (recorded, testdata/failures/screens),
// and its sign-in screen ("Select login method:", from its bundle's
// strings: this machine cannot reach the vendor to show it); and its
// retries ("Unable to connect to API (ConnectionRefused) · Retrying in 7s
// · attempt 5/10", "API error · Retrying in 8s · ..." for a 500 or 529;
// 2.1.337's "Can't reach the API server — check your internet or DNS
// (ENOTFOUND) · retrying in 5s · attempt 7/10").
func (claude) ReadScreen(lines []string) (string, string) {
	for _, l := range lines {
		if m := claudeRetryRE.FindString(l); m != "" {
			return FaultRetrying, retryText(strings.TrimSpace(l), m)
		}
	}
	if l := screenLine(lines, "Select login method", "Paste code here if prompted"); l != "" {
		return FaultLogin, l
	}
	if l := screenLine(lines, "Quick safety check", "Do you trust the files in this folder", "Detected a custom API key"); l != "" {
		return FaultDialog, l
	}
	return "", ""
}

// claudeRetryRE matches the part of claude's retry line from its
// countdown on, in either case ("· Retrying in 7s", "· retrying in 5s").
var claudeRetryRE = regexp.MustCompile(`·\s*[Rr]etrying in \d`)

// RefusedRoot reads claude's refusal to skip its permission prompts as
// root ("--dangerously-skip-permissions cannot be used with root/sudo
// privileges for security reasons", recorded by
// cli/testdata/realcli/claude_asroot.txtar).
func (claude) RefusedRoot(lines []string) bool {
	for _, l := range lines {
		if l := strings.ToLower(l); strings.Contains(l, "root/sudo") || strings.Contains(l, "as root") {
			return true
		}
	}
	return false
}
