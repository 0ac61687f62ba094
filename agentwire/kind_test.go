package agentwire

import (
	"encoding/json"
	"strings"
	"testing"
)

// The versions are what the real CLIs' --version printed (claude 2.1.197,
// codex 0.171.0).
func TestNamed(t *testing.T) {
	claude, codex := KindOf("claude"), KindOf("codex")
	for _, tt := range []struct {
		k    Kind
		v    string
		want string
	}{
		{claude, "2.1.197 (Claude Code)", "Claude Code 2.1.197"},
		{codex, "codex-cli 0.171.0", "Codex CLI 0.171.0"},
		{codex, "v1.2.3", "Codex CLI 1.2.3"},
		{claude, "", "Claude Code"},
		{claude, "dev build", "Claude Code dev build"},
		{KindOf("vim"), "9.1", "vim 9.1"},
	} {
		if got := Named(tt.k, tt.v); got != tt.want {
			t.Errorf("Named(%s, %q) = %q, want %q", tt.k.Name(), tt.v, got, tt.want)
		}
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestLaunch is each kind's command line and settings, as the box typed
// them before the kinds were one file each.
func TestLaunch(t *testing.T) {
	l := Launch{Agent: "cocoonbox-agent", Repo: "k1", PromptPath: "/r/prompt.md", SettingsPath: "/r/hooks.json", Quote: quote}
	line, settings := KindOf("claude").Launch(l)
	if want := `claude --dangerously-skip-permissions --settings '/r/hooks.json' "$(cat '/r/prompt.md')"`; line != want {
		t.Errorf("claude: %s\nwant %s", line, want)
	}
	var doc struct {
		Skip  bool `json:"skipDangerousModePermissionPrompt"`
		Hooks map[string][]struct {
			Hooks []struct{ Type, Command string }
		}
	}
	if err := json.Unmarshal(settings, &doc); err != nil || !doc.Skip || len(doc.Hooks) != 5 {
		t.Fatalf("claude settings %s: %v", settings, err)
	}
	if got := doc.Hooks["Stop"][0].Hooks[0].Command; got != "cocoonbox-agent offload event --repo k1 --cli claude --hook Stop >/dev/null" {
		t.Errorf("claude's Stop hook runs %q", got)
	}
	line, settings = KindOf("codex").Launch(l)
	if want := `codex --dangerously-bypass-approvals-and-sandbox -c 'notify=["cocoonbox-agent","offload","event","--repo","k1","--cli","codex","--hook","notify"]' "$(cat '/r/prompt.md')"`; line != want || settings != nil {
		t.Errorf("codex: %s (settings %q)\nwant %s", line, settings, want)
	}
}

// TestKindsTable: each kind's hooks, and what the box half branches on.
func TestKindsTable(t *testing.T) {
	for _, tt := range []struct {
		name, exit, binary string
		hooks              int
		confirms, settings bool
	}{
		{"claude", "/exit", "claude", 6, true, true},
		{"codex", "/quit", "codex", 2, false, false},
		{"cursor", "/exit", "cursor-agent", 0, false, false},
	} {
		k := KindNamed(tt.name)
		if k == nil {
			t.Errorf("no kind %s", tt.name)
			continue
		}
		if k.ExitCommand() != tt.exit || k.Binary() != tt.binary || len(k.Hooks()) != tt.hooks ||
			ConfirmsPaste(k) != tt.confirms || (k.HookSettings("/h") != nil) != tt.settings {
			t.Errorf("%s: exit %q, binary %q, %d hooks, confirms %v, hook settings %q", tt.name, k.ExitCommand(), k.Binary(), len(k.Hooks()), ConfirmsPaste(k), k.HookSettings("/h"))
		}
		if k.Hooks() != nil && k.Hooks()["exit"].Turn != TurnExited {
			t.Errorf("%s: no exit hook", tt.name)
		}
	}
	if KindNamed("vim") != nil || KindOf("vim").Unsupported() == "" || KindOf("vim").Hooks() != nil {
		t.Error("vim is a kind")
	}
	if got := KindOf("claude").TranscriptDir("/h", "/workspace/my.app"); got != "/h/.claude/projects/-workspace-my-app" {
		t.Errorf("claude's transcripts: %s", got)
	}
}

// TestRefusedRoot: claude's refusal as root, as the real CLI printed it
// in the pane (cli/testdata/realcli/claude_asroot.txtar), is read as one
// by claude only; another exit is not.
func TestRefusedRoot(t *testing.T) {
	refusal := []string{"", "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"}
	for _, tt := range []struct {
		kind  string
		lines []string
		want  bool
	}{
		{"claude", refusal, true},
		{"claude", []string{"Error: no API key"}, false},
		{"codex", refusal, false},
		{"cursor", refusal, false},
	} {
		if got := KindOf(tt.kind).RefusedRoot(tt.lines); got != tt.want {
			t.Errorf("%s.RefusedRoot(%q) = %v, want %v", tt.kind, tt.lines, got, tt.want)
		}
	}
}

func TestOrList(t *testing.T) {
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a or b"},
		{[]string{"a", "b", "c"}, "a, b or c"},
	} {
		if got := OrList(tt.words); got != tt.want {
			t.Errorf("OrList(%q) = %q, want %q", tt.words, got, tt.want)
		}
	}
}
