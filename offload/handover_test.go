package offload

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidateHandover(t *testing.T) {
	good := string(validHandover("go test ./...", "none"))
	tests := []struct {
		name              string
		text              string
		problem           bool
		missing, repeated []string
	}{
		{name: "valid", text: good},
		{name: "crlf", text: strings.ReplaceAll(good, "\n", "\r\n")},
		{name: "template", text: string(HandoverTemplate())},
		{name: "no title", text: strings.Replace(good, "# Hand-over: add a greeting", "# Notes", 1), problem: true},
		{name: "empty title", text: strings.Replace(good, "add a greeting", " ", 1), problem: true},
		{name: "title not first", text: "\n" + good, problem: true},
		{name: "missing", text: strings.Replace(good, "## Open questions\n", "", 1), missing: []string{"## Open questions"}},
		{name: "repeated", text: good + "\n## Commands\n", repeated: []string{"## Commands"}},
		{name: "heading inline", text: strings.Replace(good, "## Decisions made\n", "see ## Decisions made\n", 1), missing: []string{"## Decisions made"}},
		{name: "too large", text: good + strings.Repeat("x", MaxHandover), problem: true},
		{name: "not utf-8", text: good + "\xff", problem: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateHandover([]byte(tc.text))
			if !tc.problem && tc.missing == nil && tc.repeated == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var he *HandoverError
			if !errors.As(err, &he) {
				t.Fatalf("got %v, want a *HandoverError", err)
			}
			if (he.Problem != "") != tc.problem {
				t.Errorf("problem %q, want one: %v", he.Problem, tc.problem)
			}
			if diff := cmp.Diff(tc.missing, he.Missing); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.repeated, he.Repeated); diff != "" {
				t.Errorf("repeated (-want +got):\n%s", diff)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is more than one line: %q", err)
			}
		})
	}
}

func TestHandoverTemplateAndPrompt(t *testing.T) {
	tpl := string(HandoverTemplate())
	for _, h := range Headings {
		if strings.Count(tpl, "\n"+h+"\n") != 1 {
			t.Errorf("the template has %q not exactly once", h)
		}
	}
	p := HandoverPrompt("/x/handover.md", "codex")
	for _, want := range append([]string{"/x/handover.md", "cocoonbox offload --kind codex", HandoverTitle}, Headings...) {
		if !strings.Contains(p, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
}
