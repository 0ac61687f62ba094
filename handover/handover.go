// Package handover is the hand-over format of offload (seeds/001, "Offload
// (design §27)", the hand-over): the document a local coding agent writes
// and a fresh box agent continues from. Both halves check it with
// Validate: the laptop before anything else, the box on send and post.
package handover

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Title starts a hand-over's first line, which goes on to name the task.
const Title = "# Hand-over: "

// Max is the largest hand-over, in bytes.
const Max = 256 << 10

// Headings are the ten headings every hand-over carries once each, each
// as its own line, in this order in a template.
var Headings = []string{
	"## Goal and definition of done",
	"## User preferences and constraints",
	"## Current state",
	"## Decisions made",
	"## Files touched",
	"## Next steps",
	"## Commands",
	"## Environment facts",
	"## Gotchas learned",
	"## Open questions",
}

// Error is a hand-over that breaks the rules. Its message is one line.
type Error struct {
	// Problem says what is wrong beyond the headings, such as the size or
	// the first line; empty if nothing is.
	Problem string
	// Missing and Repeated list the headings absent or present more than
	// once, in template order.
	Missing, Repeated []string
}

func (e *Error) Error() string {
	return "the hand-over " + strings.Join(e.Problems(), "; ")
}

// Problems lists each of e's problems as a phrase whose subject is the
// hand-over ("lacks ## Next steps"): Problem, then the missing headings,
// then the repeated ones.
func (e *Error) Problems() []string {
	var parts []string
	if e.Problem != "" {
		parts = append(parts, e.Problem)
	}
	if len(e.Missing) > 0 {
		parts = append(parts, "lacks "+strings.Join(e.Missing, ", "))
	}
	if len(e.Repeated) > 0 {
		parts = append(parts, "has "+strings.Join(e.Repeated, ", ")+" more than once")
	}
	return parts
}

// Validate checks b: at most Max bytes of UTF-8, a first line of Title and
// the task, and every heading of Headings once as its own line (trailing
// blanks and CRLF endings allowed). It returns nil or an *Error.
func Validate(b []byte) error {
	if len(b) > Max {
		return &Error{Problem: fmt.Sprintf("is %d bytes, over the %d KiB limit", len(b), Max>>10)}
	}
	if !utf8.Valid(b) {
		return &Error{Problem: "is not UTF-8 text"}
	}
	lines := strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
	e := &Error{}
	if !strings.HasPrefix(lines[0], Title) || strings.TrimSpace(strings.TrimPrefix(lines[0], Title)) == "" {
		e.Problem = fmt.Sprintf("does not start with a %q line that names the task", Title)
	}
	count := map[string]int{}
	for _, l := range lines[1:] {
		count[strings.TrimRight(l, " \t")]++
	}
	for _, h := range Headings {
		switch n := count[h]; {
		case n == 0:
			e.Missing = append(e.Missing, h)
		case n > 1:
			e.Repeated = append(e.Repeated, h)
		}
	}
	if e.Problem != "" || len(e.Missing) > 0 || len(e.Repeated) > 0 {
		return e
	}
	return nil
}
