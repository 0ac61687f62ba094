package boxsession

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"unicode"
)

// ParseTTY reads what a client puts on the session's command line: it
// never panics; a value it takes has a terminfo name of termRE, a size
// that fits a winsize and modes that say again what they were given; a
// value it refuses gets one printable line naming it.
func FuzzParseTTY(f *testing.F) {
	for _, s := range []string{
		"xterm-256color:24x80", "xterm:0x0", "vt100:65535x65535:", "xterm:24x80:" + hex.EncodeToString([]byte{1, 0, 0, 0, 3, 0}),
		"xterm:24x80:0", "xterm:24x80:zz", "xterm:65536x1", "xterm:-1x2", "xterm:24x80:00:00", ":24x80", "x:24", "a\nb:1x1", "\x1b[2J:1x1",
		"xterm:+24x80", "xterm:24x8\x000", strings.Repeat("a", 70) + ":1x1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		tty, err := ParseTTY(spec)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, "bad --tty") {
				t.Fatalf("refusal %q names no --tty", msg)
			}
			for _, r := range msg {
				if !unicode.IsPrint(r) {
					t.Fatalf("refusal of %q is not one printable line: %q", spec, msg)
				}
			}
			return
		}
		if !termName(tty.Term) || tty.Rows > 0xffff || tty.Cols > 0xffff {
			t.Fatalf("took %q as %+v", spec, tty)
		}
		again := fmt.Sprintf("%s:%dx%d", tty.Term, tty.Rows, tty.Cols)
		if strings.Count(spec, ":") == 2 {
			again += ":" + hex.EncodeToString(tty.Modes)
		}
		back, err := ParseTTY(again)
		if err != nil || back.Term != tty.Term || back.Rows != tty.Rows || back.Cols != tty.Cols || string(back.Modes) != string(tty.Modes) {
			t.Fatalf("%q took as %+v, which reads back as %+v (%v)", spec, tty, back, err)
		}
	})
}
