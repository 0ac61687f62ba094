package offload

import (
	"slices"
	"testing"
)

func TestKinds(t *testing.T) {
	if got := KindNames(); !slices.Equal(got, []string{"claude", "codex", "cursor"}) {
		t.Errorf("kinds %v", got)
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
