package offload

import (
	"slices"
	"strings"
	"testing"
)

func TestKinds(t *testing.T) {
	if got := KindNames(); !slices.Equal(got, []string{"claude", "codex"}) {
		t.Errorf("kinds %v", got)
	}
	if _, err := LookupKind("cursor"); err == nil || !strings.Contains(err.Error(), "--kind cursor is not supported yet: Cursor CLI sessions are not built into the box agent yet; use claude or codex") {
		t.Errorf("cursor: %v", err)
	}
	for _, n := range KindNames() {
		k, err := LookupKind(n)
		if err != nil || k.Title == "" || k.Install == "" || k.Login == "" || len(k.Hosts) == 0 {
			t.Errorf("%s: %+v, %v", n, k, err)
		}
		for _, h := range k.Hosts {
			if _, ok := AllowedLink("https://"+h+"/login", k.Hosts); !ok {
				t.Errorf("%s: its own host %s is not allowed", n, h)
			}
		}
	}
	if _, err := LookupKind("vim"); err == nil {
		t.Error("vim: found")
	}
}

// The versions are what the real CLIs' --version printed (claude 2.1.197,
// codex 0.171.0).
func TestKindNamed(t *testing.T) {
	claude, _ := LookupKind("claude")
	codex, _ := LookupKind("codex")
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
	} {
		if got := tt.k.Named(tt.v); got != tt.want {
			t.Errorf("Named(%q) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
