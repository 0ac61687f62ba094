package agentwire

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadAPIKey(t *testing.T) {
	long := strings.Repeat("k", MaxAPIKey+1)
	for _, tt := range []struct {
		name, in, want, err string
	}{
		{name: "one line", in: "sk-ant-api03-abc\n", want: "sk-ant-api03-abc"},
		{name: "no newline", in: "sk-abc", want: "sk-abc"},
		{name: "CRLF and blanks around", in: "  sk-abc \r\nnext line\n", want: "sk-abc"},
		{name: "empty", in: "", err: "no API key on stdin"},
		{name: "empty line", in: "\nsk-abc\n", err: "no API key on stdin"},
		{name: "blank line", in: " \t\r\n", err: "no API key on stdin"},
		{name: "two words", in: "sk-one two\n", err: "holds a space"},
		{name: "escape", in: "sk-\x1b[2~abc\n", err: "control character"},
		{name: "non-ASCII", in: "sk-é\n", err: "non-ASCII"},
		{name: "too long, one line", in: long + "\n", err: "longer than 4096 bytes"},
		{name: "too long, no newline", in: long + long, err: "longer than 4096 bytes"},
	} {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tt.in)
			if oneByte {
				r = iotest.OneByteReader(r)
			}
			got, err := ReadAPIKey(r)
			switch {
			case tt.err == "" && (err != nil || got != tt.want):
				t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || got != ""):
				t.Errorf("%s: %q, %v; want an error with %q", tt.name, got, err, tt.err)
			}
		}
	}
	if _, err := ReadAPIKey(strings.NewReader("")); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("empty: %v, want ErrNoAPIKey", err)
	}
}

// TestReadSignIn reads what the real CLIs printed: claude 2.1.197's
// `claude auth status` with the apiKeyHelper of its settings, with
// ANTHROPIC_API_KEY, with both, and signed out; codex 0.171.0's `codex
// login status` after `codex login --with-api-key`, and signed out.
func TestReadSignIn(t *testing.T) {
	yes, no := true, false
	claude, codex := KindOf("claude"), KindOf("codex")
	for _, tt := range []struct {
		k    Kind
		out  string
		want SignInState
	}{
		{claude, `{"loggedIn": true, "authMethod": "api_key_helper", "apiProvider": "firstParty", "apiKeySource": "apiKeyHelper"}`,
			SignInState{SignedIn: &yes, ByKey: true, KeySource: "apiKeyHelper"}},
		{claude, `{"loggedIn": true, "authMethod": "api_key", "apiProvider": "firstParty", "apiKeySource": "ANTHROPIC_API_KEY"}`,
			SignInState{SignedIn: &yes, ByKey: true, KeySource: "ANTHROPIC_API_KEY"}},
		{claude, `{"loggedIn": true, "authMethod": "api_key_helper", "apiProvider": "firstParty", "apiKeySource": "ANTHROPIC_API_KEY"}`,
			SignInState{SignedIn: &yes, ByKey: true, KeySource: "ANTHROPIC_API_KEY"}},
		{claude, `{"loggedIn": false, "authMethod": "none", "apiProvider": "firstParty"}`, SignInState{SignedIn: &no}},
		{claude, `{"loggedIn": true, "authMethod": "claude.ai", "email": "a@example.com"}`, SignInState{SignedIn: &yes, Account: "a@example.com"}},
		{claude, "not JSON", SignInState{}},
		{codex, "API key configured - sk-test-***bcdef\nAuthentication is checked when you send a request.\n", SignInState{ByKey: true}},
		{codex, "Not logged in\n", SignInState{}},
		{KindOf("cursor"), "whatever", SignInState{}},
	} {
		got := tt.k.ReadSignIn(tt.out)
		if (got.SignedIn == nil) != (tt.want.SignedIn == nil) || (got.SignedIn != nil && *got.SignedIn != *tt.want.SignedIn) ||
			got.Account != tt.want.Account || got.ByKey != tt.want.ByKey || got.KeySource != tt.want.KeySource {
			t.Errorf("%s: ReadSignIn(%q) = %+v, want %+v", tt.k.Name(), tt.out, got, tt.want)
		}
	}
}

// TestKeySignIn: claude's apiKeyHelper goes into its settings with
// nothing else changed; codex signs in by its own command.
func TestKeySignIn(t *testing.T) {
	ks := KindOf("claude").KeySignIn("/h")
	if ks.Settings != "/h/.claude/settings.json" || ks.Command != "" || ks.Source != "apiKeyHelper" {
		t.Fatalf("claude: %+v", ks)
	}
	out, err := ks.Helper([]byte(`{"model": "opus", "apiKeyHelper": "old", "env": {"A": "1"}}`), ks.Settings, "cat '/k'")
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"apiKeyHelper\": \"cat '/k'\",\n  \"env\": {\n    \"A\": \"1\"\n  },\n  \"model\": \"opus\"\n}\n"
	if string(out) != want {
		t.Errorf("claude settings:\n%s\nwant\n%s", out, want)
	}
	if out, err := ks.Helper(nil, ks.Settings, "cat /k"); err != nil || string(out) != "{\n  \"apiKeyHelper\": \"cat /k\"\n}\n" {
		t.Errorf("new settings: %q, %v", out, err)
	}
	if _, err := ks.Helper([]byte("[1]"), ks.Settings, "cat /k"); err == nil || !strings.Contains(err.Error(), "/h/.claude/settings.json is not a JSON object") {
		t.Errorf("an array: %v", err)
	}
	ks = KindOf("codex").KeySignIn("/h")
	if ks.Command != "codex login --with-api-key" || ks.File != "/h/.codex/auth.json" || ks.Helper != nil {
		t.Errorf("codex: %+v", ks)
	}
	if ks := KindOf("cursor").KeySignIn("/h"); ks.Command != "" || ks.Helper != nil {
		t.Errorf("cursor: %+v", ks)
	}
}
