package offload

import (
	"strings"
	"unicode"
)

// Printable returns s fit to print on a terminal: every C0 and C1 control
// character and DEL (ESC among them) but newline and tab becomes '?', and
// bytes that are not UTF-8 become U+FFFD. Text from the box (the box
// agent's hand-overs and messages) then cannot move the cursor, clear the
// screen, retitle the window or set the clipboard (OSC 52).
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return '?'
	}, s)
}
