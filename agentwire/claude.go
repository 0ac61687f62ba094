package agentwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// claude is Claude Code.
type claude struct{ facts }

var claudeKind = claude{facts{
	name: "claude", title: "Claude Code", binary: "claude",
	install: Install{Command: "curl -fsSL https://claude.ai/install.sh | bash",
		ScriptURL: "https://claude.ai/install.sh", Package: "@anthropic-ai/claude-code"},
	login:  "claude auth login",
	hosts:  []string{"claude.ai", "claude.com", "anthropic.com"},
	status: "claude auth status", exit: "/exit", apiKeyVar: "ANTHROPIC_API_KEY",
}}

// ReadSignIn reads `claude auth status`, JSON with loggedIn, email,
// authMethod (api_key or api_key_helper for a key) and apiKeySource.
func (claude) ReadSignIn(out string) SignInState {
	var st struct {
		LoggedIn     *bool  `json:"loggedIn"`
		Email        string `json:"email"`
		AuthMethod   string `json:"authMethod"`
		APIKeySource string `json:"apiKeySource"`
	}
	if json.Unmarshal([]byte(out), &st) != nil || st.LoggedIn == nil {
		return SignInState{}
	}
	return SignInState{SignedIn: st.LoggedIn, Account: st.Email, KeySource: st.APIKeySource,
		ByKey: st.AuthMethod == "api_key" || st.AuthMethod == "api_key_helper"}
}

// KeySignIn is Claude Code's apiKeyHelper setting in the user's
// settings: "Custom script, to be executed in /bin/sh, to generate an
// auth value", sent as X-Api-Key and Authorization: Bearer (Claude Code
// "Settings", "Available settings").
func (claude) KeySignIn(home string) KeySignIn {
	return KeySignIn{Settings: filepath.Join(home, ".claude", "settings.json"), Source: "apiKeyHelper",
		Helper: func(settings []byte, path, helper string) ([]byte, error) {
			return editJSON(settings, path, func(doc map[string]any) { doc["apiKeyHelper"] = helper })
		}}
}

// editJSON is config, a JSON object (empty for none), with edit applied,
// indented as claude writes its files; an error says config is not an
// object, naming path.
func editJSON(config []byte, path string, edit func(doc map[string]any)) ([]byte, error) {
	doc := map[string]any{}
	if len(bytes.TrimSpace(config)) > 0 {
		if err := json.Unmarshal(config, &doc); err != nil {
			return nil, fmt.Errorf("%s is not a JSON object (%v); fix or remove it", path, err)
		}
	}
	edit(doc)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// HookSettings are the managed settings, then the user's: any of them
// may set allowManagedHooksOnly or disableAllHooks.
func (claude) HookSettings(home string) []string {
	files := []string{"/etc/claude-code/managed-settings.json"}
	d, _ := filepath.Glob("/etc/claude-code/managed-settings.d/*")
	slices.Sort(d)
	files = append(files, d...)
	return append(files, filepath.Join(home, ".claude", "remote-settings.json"), filepath.Join(home, ".claude", "settings.json"))
}

// claudeHooks are the hooks the session's settings file sets.
var claudeHooks = map[string]Hook{
	"UserPromptSubmit": {Turn: TurnStart},
	"Stop":             {Turn: TurnEnd},
	"StopFailure":      {Turn: TurnEnd, Failed: true},
	"Notification":     {Turn: TurnWaiting},
	"SessionEnd":       {Turn: TurnSessionEnd},
}

func (claude) Hooks() map[string]Hook {
	h := map[string]Hook{"exit": {Turn: TurnExited}}
	for n, v := range claudeHooks {
		h[n] = v
	}
	return h
}

// Launch runs claude with a settings file of our hooks only, and
// skipDangerousModePermissionPrompt so the bypass-mode dialog does not
// hold the first prompt.
func (claude) Launch(l Launch) (string, []byte) {
	hooks := map[string]any{}
	for name := range claudeHooks {
		cmd := EventLine(l.Agent, l.Repo, "claude", name) + " >/dev/null"
		hooks[name] = []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": cmd}}}}
	}
	b, _ := json.MarshalIndent(map[string]any{"skipDangerousModePermissionPrompt": true, "hooks": hooks}, "", "  ")
	line := fmt.Sprintf("claude --dangerously-skip-permissions --settings %s \"$(cat %s)\"", l.Quote(l.SettingsPath), l.Quote(l.PromptPath))
	return line, append(b, '\n')
}

func (claude) TrustFile(home string) string { return filepath.Join(home, ".claude.json") }

// Trust sets hasCompletedOnboarding and projects[dir].hasTrustDialogAccepted.
// With a key, claude's first-run "Detected a custom API key" dialog
// would hold the first prompt too: its tail goes into
// customApiKeyResponses.approved, as answering Yes records it (the user
// set the key for the box's CLI).
func (claude) Trust(config []byte, path, dir, keyTail string) ([]byte, uint32, error) {
	out, err := editJSON(config, path, func(doc map[string]any) {
		doc["hasCompletedOnboarding"] = true
		projects, _ := doc["projects"].(map[string]any)
		if projects == nil {
			projects = map[string]any{}
		}
		p, _ := projects[dir].(map[string]any)
		if p == nil {
			p = map[string]any{}
		}
		p["hasTrustDialogAccepted"] = true
		projects[dir] = p
		doc["projects"] = projects
		if keyTail == "" {
			return
		}
		r, _ := doc["customApiKeyResponses"].(map[string]any)
		if r == nil {
			r = map[string]any{}
		}
		approved, _ := r["approved"].([]any)
		rejected, _ := r["rejected"].([]any)
		if !slices.Contains(approved, any(keyTail)) {
			approved = append(approved, keyTail)
		}
		// A key rejected before is the user's choice: left rejected.
		if rejected == nil {
			rejected = []any{}
		}
		r["approved"], r["rejected"] = approved, rejected
		doc["customApiKeyResponses"] = r
	})
	return out, 0, err
}

// TranscriptDir is ~/.claude/projects/<dir with every character other
// than a letter or digit made '-'>.
func (claude) TranscriptDir(home, dir string) string {
	return filepath.Join(home, ".claude", "projects", strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, dir))
}
