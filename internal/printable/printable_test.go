package printable

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"# Hand-over: x\n\tindented\n":            "# Hand-over: x\n\tindented\n",
		"\x1b]0;pwned\x07title":                   "?]0;pwned?title",
		"\x1b]52;c;aGk=\x1b\\clip":                "?]52;c;aGk=?\\clip",
		"\x1b[2Jclear\r\n":                        "?[2Jclear?\n",
		"c1 \u009b31m csi and \u0085 nel":         "c1 ?31m csi and ? nel",
		"del\x7f nul\x00 bs\b":                    "del? nul? bs?",
		"bad \x9b byte \xff":                      "bad \ufffd byte \ufffd",
		"ünïcödé ✓ 日本":                            "ünïcödé ✓ 日本",
		"\u202eevil\u202c \u2066x\u2069 a\u2028b": "?evil? ?x? a?b",
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
	in := "no box \"" + strings.Repeat("b", 500) + "\"; to do it: x --yes\n\x1b[31mnext:\tcocoonbox boxes list"
	want := "no box \"" + strings.Repeat("b", 66) + "…" + strings.Repeat("b", 5) + "\"; to do it: x --yes\n?[31mnext:\tcocoonbox boxes list"
	if got := Lines(in, 100); got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
	if got := utf8.RuneCountInString(strings.Split(Lines(in, 100), "\n")[0]); got != 100 {
		t.Errorf("the cut line has %d runes, want 100", got)
	}
}

// TestJSON: the runes a terminal acts on or reorders by are escaped in
// JSON's strings, compact or indented, and the value read back is the
// same; text with none of them is the same bytes.
func TestJSON(t *testing.T) {
	v := map[string]any{"name": "a\u009b31mb", "del": "x\x7fy", "nel": "\u0085", "ls": "\u2028\u2029",
		"bidi": "\u202eevil\u202c \u2066\u2069 \u200f\u061c", "esc": "\x1b]52;c;aGk=\a", "ok": "ünïcödé ✓ 日本"}
	for _, indent := range []bool{false, true} {
		b, _ := json.Marshal(v)
		if indent {
			b, _ = json.MarshalIndent(v, "", "  ")
		}
		got := JSON(b)
		if i := strings.IndexFunc(string(got), func(r rune) bool {
			return unicode.IsControl(r) && r != '\n' || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
		}); i >= 0 {
			t.Errorf("JSON left %q raw in %s", []rune(string(got[i:]))[0], got)
		}
		for _, esc := range []string{`a\u009b31mb`, `x\u007fy`, `\u0085`, `\u202eevil\u202c`, `\u200f\u061c`} {
			if !strings.Contains(string(got), esc) {
				t.Errorf("JSON(%s) has no %s", b, esc)
			}
		}
		var back map[string]any
		if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, v) {
			t.Errorf("JSON(%s) = %s reads back as %v, %v", b, got, back, err)
		}
	}
	plain := []byte(`{"a":"ünïcödé ✓ 日本","b":[1,2]}`)
	if got := JSON(plain); string(got) != string(plain) {
		t.Errorf("JSON changed %s to %s", plain, got)
	}
}
