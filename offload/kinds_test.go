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
		if err != nil || k.Title() == "" || k.Install().Command == "" || k.Login() == "" || len(k.Hosts()) == 0 {
			t.Errorf("%s: %+v, %v", n, k, err)
			continue
		}
		for _, h := range k.Hosts() {
			if _, ok := AllowedLink("https://"+h+"/login", k.Hosts()); !ok {
				t.Errorf("%s: its own host %s is not allowed", n, h)
			}
		}
	}
	if _, err := LookupKind("vim"); err == nil {
		t.Error("vim: found")
	}
}
