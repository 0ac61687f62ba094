package agentwire

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// codex is the Codex CLI.
type codex struct{ facts }

var codexKind = codex{facts{
	name: "codex", title: "Codex CLI", binary: "codex",
	install: Install{Command: "npm install -g --prefix \"$HOME/.local\" @openai/codex", Package: "@openai/codex"},
	login:   "codex login --device-auth",
	hosts:   []string{"openai.com", "chatgpt.com"},
	status:  "codex login status", exit: "/quit",
}}

// ReadSignIn: `codex login status` says it in its exit status, and in
// words that name an API key when it has one ("API key configured - …",
// before 0.100 "Logged in using an API key - …").
func (codex) ReadSignIn(out string) SignInState {
	return SignInState{ByKey: strings.Contains(out, "API key")}
}

// KeySignIn is codex's own `codex login --with-api-key`, which keeps the
// key in ~/.codex/auth.json, 0600.
func (codex) KeySignIn(home string) KeySignIn {
	return KeySignIn{Command: "codex login --with-api-key", File: filepath.Join(home, ".codex", "auth.json")}
}

// HookSettings: no settings file turns codex's notify off.
func (codex) HookSettings(string) []string { return nil }

// Hooks: codex has no hooks, but runs its notify program at the end of
// each turn, for threads of its own too.
func (codex) Hooks() map[string]Hook {
	return map[string]Hook{"notify": {Turn: TurnEnd, Thread: true}, "exit": {Turn: TurnExited}}
}

// Launch sets notify to our event line (codex passes the payload as its
// last argument).
func (codex) Launch(l Launch) (string, []byte) {
	argv, _ := json.Marshal(eventArgv(l.Agent, l.Repo, "codex", "notify"))
	return fmt.Sprintf("codex --dangerously-bypass-approvals-and-sandbox -c %s \"$(cat %s)\"", l.Quote("notify="+string(argv)), l.Quote(l.PromptPath)), nil
}

func (codex) TrustFile(home string) string { return filepath.Join(home, ".codex", "config.toml") }

// Trust sets trust_level = "trusted" in the project's table of
// config.toml, adding the table when it is not there; other lines stay as
// they are. The file is written 0600.
func (codex) Trust(config []byte, _, dir, _ string) ([]byte, uint32, error) {
	header := `[projects."` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(dir) + `"]`
	lines := strings.Split(strings.TrimRight(string(config), "\n"), "\n")
	if len(config) == 0 {
		lines = nil
	}
	in, done := false, false
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			if in && !done {
				out = append(out, `trust_level = "trusted"`)
				done = true
			}
			in = t == header
		}
		if in && strings.HasPrefix(t, "trust_level") && strings.Contains(strings.SplitN(t, "=", 2)[0], "trust_level") {
			if !done {
				out = append(out, `trust_level = "trusted"`)
				done = true
			}
			continue
		}
		out = append(out, l)
	}
	if in && !done {
		out = append(out, `trust_level = "trusted"`)
		done = true
	}
	if !done {
		if len(out) > 0 {
			out = append(out, "")
		}
		out = append(out, header, `trust_level = "trusted"`)
	}
	return []byte(strings.Join(out, "\n") + "\n"), 0o600, nil
}

// TranscriptDir: codex keeps every session under ~/.codex/sessions.
func (codex) TranscriptDir(home, _ string) string { return filepath.Join(home, ".codex", "sessions") }
