package modeltest

import (
	"slices"
	"strings"
	"testing"
)

func TestPlanOf(t *testing.T) {
	first := "Write your hand-over to /h/handover.md first and send it with `cocoonbox-agent offload post --progress < '/h/handover.md'` (or --back)\n" +
		"## Next steps\nmodel: bash echo a > a.txt\nmodel: progress\nnot a step: model: bash no\n"
	plan := planOf(first, []string{first})
	if len(plan) != 2 || plan[0] != "echo a > a.txt" || !strings.HasSuffix(plan[1], "cocoonbox-agent offload post --progress < '/h/handover.md'") {
		t.Errorf("first prompt's plan: %q", plan)
	}
	back := "BACK: the user is taking this task back now. Stop at a safe point, commit your work (never push), write your hand-over to /h/handover.md with every heading of the template, then run: cocoonbox-agent offload post --back < '/h/handover.md'\n\nmodel: bash echo b"
	plan = planOf(back, []string{first, back})
	if len(plan) != 4 || !strings.HasPrefix(plan[0], "git add -A") || plan[1] != "echo b" ||
		!strings.HasSuffix(plan[2], "> '/h/handover.md'") || plan[3] != "cocoonbox-agent offload post --back < '/h/handover.md'" {
		t.Errorf("BACK's plan: %q", plan)
	}
	if p := planOf("hello", nil); !slices.Equal(p, nil) {
		t.Errorf("a prompt without steps: %q", p)
	}
}
