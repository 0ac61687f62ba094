package handover

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func valid() string {
	var b strings.Builder
	b.WriteString(Title + "add a greeting\n")
	for _, h := range Headings {
		b.WriteString("\n" + h + "\nnone\n")
	}
	return b.String()
}

func TestValidate(t *testing.T) {
	good := valid()
	tests := []struct {
		name              string
		text              string
		problem           string
		missing, repeated []string
	}{
		{name: "valid", text: good},
		{name: "crlf", text: strings.ReplaceAll(good, "\n", "\r\n")},
		{name: "trailing blanks", text: strings.Replace(good, "## Commands\n", "## Commands  \n", 1)},
		{name: "no title", text: strings.Replace(good, Title+"add a greeting", "# Notes", 1), problem: "does not start with"},
		{name: "empty title", text: strings.Replace(good, "add a greeting", " ", 1), problem: "does not start with"},
		{name: "title not first", text: "\n" + good, problem: "does not start with"},
		{name: "missing", text: strings.Replace(good, "## Open questions\n", "", 1), missing: []string{"## Open questions"}},
		{name: "two missing", text: strings.Replace(strings.Replace(good, "## Open questions\n", "", 1), "## Decisions made\n", "", 1), missing: []string{"## Decisions made", "## Open questions"}},
		{name: "repeated", text: good + "\n## Commands\n", repeated: []string{"## Commands"}},
		{name: "heading inline", text: strings.Replace(good, "## Decisions made\n", "see ## Decisions made\n", 1), missing: []string{"## Decisions made"}},
		{name: "too large", text: good + strings.Repeat("x", Max), problem: "over the 256 KiB limit"},
		{name: "not utf-8", text: good + "\xff", problem: "not UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate([]byte(tc.text))
			if tc.problem == "" && tc.missing == nil && tc.repeated == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var he *Error
			if !errors.As(err, &he) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if !strings.Contains(he.Problem, tc.problem) || (tc.problem == "") != (he.Problem == "") {
				t.Errorf("problem %q, want one with %q", he.Problem, tc.problem)
			}
			if diff := cmp.Diff(tc.missing, he.Missing); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.repeated, he.Repeated); diff != "" {
				t.Errorf("repeated (-want +got):\n%s", diff)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "the hand-over ") {
				t.Errorf("the error is not one line about the hand-over: %q", msg)
			}
		})
	}
}

func TestErrorNamesEveryHeading(t *testing.T) {
	err := Validate([]byte(Title + "x\n"))
	for _, h := range Headings {
		if !strings.Contains(err.Error(), h) {
			t.Errorf("%q does not name %s", err, h)
		}
	}
}
