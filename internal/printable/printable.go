// Package printable makes text from arguments, files and servers safe to
// print on a terminal: no control characters, no invalid UTF-8, and one
// line cut to a length where a value could be long; and JSON that stays
// the same value with every such rune escaped.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s fit to print on a terminal: every C0 and C1 control
// character and DEL (ESC among them) but newline and tab becomes '?', and
// so does each bidirectional control and the line and paragraph
// separators (U+2028, U+2029); bytes that are not UTF-8 become U+FFFD.
// Text from a box or a server then cannot move the cursor, clear the
// screen, retitle the window or set the clipboard (OSC 52), nor reorder
// what a line shows (a right-to-left override) or seem to end it.
func Text(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unsafe(r) {
			return r
		}
		return '?'
	}, s)
}

// Line is Text on one line: newline and tab become '?' too, and a value
// of more than max runes is cut to max and ends in "…". max <= 0 means no
// cut.
func Line(s string, max int) string {
	return cut(strings.Map(func(r rune) rune {
		if unsafe(r) {
			return '?'
		}
		return r
	}, s), max)
}

// unsafe reports whether r is not printed raw: a control character, a
// bidirectional control, or a line or paragraph separator.
func unsafe(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r)
}

// Lines is Text with each line of more than max runes cut in the
// middle: its first runes and its last max/4, with "…" between, max in
// all. A message of several lines keeps them, and its tabs, no line
// floods the terminal, and a line's end, where an error names the next
// step, stays whole however long the value before it.
func Lines(s string, max int) string {
	lines := strings.Split(Text(s), "\n")
	for i, l := range lines {
		lines[i] = cutMiddle(l, max)
	}
	return strings.Join(lines, "\n")
}

// cutMiddle keeps the first max-max/4-1 runes of s and its last max/4,
// joined by "…", when s has more than max runes.
func cutMiddle(s string, max int) string {
	n := utf8.RuneCountInString(s)
	if max <= 0 || n <= max {
		return s
	}
	r := []rune(s)
	tail := max / 4
	return string(r[:max-tail-1]) + "…" + string(r[n-tail:])
}

// cut keeps the first max runes of s, and "…" when there were more.
func cut(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// JSON returns b, a JSON text as encoding/json writes it, with every rune
// that is not safe to print raw escaped as \uXXXX: DEL and the C1
// controls (U+009B is a CSI, which a terminal takes as ESC [), the line
// and paragraph separators, and the bidirectional controls, which reorder
// what a terminal or an editor shows (encoding/json escapes the C0
// controls itself, and writes invalid UTF-8 as U+FFFD, as this does too).
// The value is the same: outside its strings JSON is ASCII, and inside
// one a \u escape stands for the rune it replaces.
func JSON(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < 0x7f {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, i, len(b)+16)
	copy(out, b[:i])
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if unsafeInJSON(r) || r == utf8.RuneError && n == 1 {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// unsafeInJSON reports whether JSON escapes r: what encoding/json has
// not (the C0 controls, which it escapes in strings; outside them they
// are JSON's white space).
func unsafeInJSON(r rune) bool { return r >= 0x7f && unsafe(r) }
