package offload

import (
	"github.com/cocoonbox/cocoonbox/handover"

	"strings"
	"testing"
)

func TestHandoverTemplateAndPrompt(t *testing.T) {
	if err := handover.Validate(HandoverTemplate()); err != nil {
		t.Errorf("the template does not validate: %v", err)
	}
	tpl := string(HandoverTemplate())
	for _, h := range handover.Headings {
		if strings.Count(tpl, "\n"+h+"\n") != 1 {
			t.Errorf("the template has %q not exactly once", h)
		}
	}
	p := HandoverPrompt("/x/handover.md", "codex")
	for _, want := range append([]string{"/x/handover.md", "cocoonbox offload --kind codex", handover.Title}, handover.Headings...) {
		if !strings.Contains(p, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
}
