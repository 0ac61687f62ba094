// Package printable makes text from arguments, files and servers safe to
// print on a terminal: no control characters, no invalid UTF-8, and one
// line cut to a length where a value could be long.
package printable

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s fit to print on a terminal: every C0 and C1 control
// character and DEL (ESC among them) but newline and tab becomes '?', and
// bytes that are not UTF-8 become U+FFFD. Text from a box or a server
// then cannot move the cursor, clear the screen, retitle the window or set
// the clipboard (OSC 52).
func Text(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
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
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s), max)
}

// Lines is Text with each line cut as Line cuts a value, so that a
// message of several lines keeps them, and its tabs, and no line floods
// the terminal.
func Lines(s string, max int) string {
	lines := strings.Split(Text(s), "\n")
	for i, l := range lines {
		lines[i] = cut(l, max)
	}
	return strings.Join(lines, "\n")
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
