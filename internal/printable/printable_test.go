package printable

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"# Hand-over: x\n\tindented\n":    "# Hand-over: x\n\tindented\n",
		"\x1b]0;pwned\x07title":           "?]0;pwned?title",
		"\x1b]52;c;aGk=\x1b\\clip":        "?]52;c;aGk=?\\clip",
		"\x1b[2Jclear\r\n":                "?[2Jclear?\n",
		"c1 \u009b31m csi and \u0085 nel": "c1 ?31m csi and ? nel",
		"del\x7f nul\x00 bs\b":            "del? nul? bs?",
		"bad \x9b byte \xff":              "bad \ufffd byte \ufffd",
		"ünïcödé ✓ 日本":                    "ünïcödé ✓ 日本",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"dev_x\n\x1b[31mRED", 0, "dev_x??[31mRED"},
		{"a\tb", 10, "a?b"},
		{"abcdef", 3, "abc…"},
		{"abc", 3, "abc"},
		{"日本語テキスト", 2, "日本…"},
		{strings.Repeat("b", 5000), 64, strings.Repeat("b", 64) + "…"},
	} {
		if got := Line(c.in, c.max); got != c.want {
			t.Errorf("Line(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestLines(t *testing.T) {
	in := "no box \"" + strings.Repeat("b", 500) + "\"\n\x1b[31mnext:\tcocoonbox boxes list"
	want := "no box \"" + strings.Repeat("b", 92) + "…\n?[31mnext:\tcocoonbox boxes list"
	if got := Lines(in, 100); got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}
