package usage

import (
	"strings"
	"testing"
	"time"
)

func TestPage(t *testing.T) {
	p := Page{
		Name:        "tool",
		Short:       "does a thing",
		Synopsis:    []string{"tool [-v] ARG", "[more]"},
		Description: []string{"tool does\na thing with -v.", ".dot first"},
		Exit:        "0, or 1",
		Environment: [][2]string{{"TOOL_X", `a \ backslash`}},
		SeeAlso:     []string{"ssh(1)"},
	}
	if got, want := p.Usage(), "usage: tool [-v] ARG\n           [more]\n"; got != want {
		t.Errorf("Usage = %q, want %q", got, want)
	}
	h := p.Help()
	for _, want := range []string{"usage: tool [-v] ARG\n", "\ntool does a thing with -v.\n", "Exit status: 0, or 1", "  TOOL_X ", "The manual: man tool\n"} {
		if !strings.Contains(h, want) {
			t.Errorf("Help lacks %q:\n%s", want, h)
		}
	}
	r := string(p.Roff(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "cocoonbox"))
	for _, want := range []string{`.TH "TOOL" "1" "Dec 2026" "cocoonbox" "cocoonbox manual"`, ".SH NAME\ntool \\- does a thing\n", "tool [\\-v] ARG\n", "\\&.dot first", `a \e backslash`, ".SH SEE ALSO\nssh(1)"} {
		if !strings.Contains(r, want) {
			t.Errorf("Roff lacks %q:\n%s", want, r)
		}
	}
}

// Wrap counts runes, not bytes: a line of non-ASCII words is as long as
// an ASCII one; a word longer than the width stands alone.
func TestWrap(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ab cd ef", "ab cd\nef"},
		{"äb çd éf", "äb çd\néf"},
		{"a /a/long/path b", "a\n/a/long/path\nb"},
	} {
		if got := Wrap(c.in, 5); got != c.want {
			t.Errorf("Wrap(%q, 5) = %q, want %q", c.in, got, c.want)
		}
	}
}
