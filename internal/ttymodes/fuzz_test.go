//go:build linux || darwin

package ttymodes

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Apply takes the modes of any client: it never panics, changes nothing
// after TTY_OP_END or an opcode of 160 and above, and never the speeds
// nor a control character no opcode names.
func FuzzApply(f *testing.F) {
	var t0 unix.Termios
	f.Add(Encode(&t0))
	f.Add([]byte{1, 0, 0, 0, 3, 0, 53, 0, 0, 0, 1})
	f.Add([]byte{91, 0, 0, 0})
	f.Add([]byte{0, 53, 0, 0, 0, 1})
	f.Add([]byte{160, 53, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got unix.Termios
		got.Ispeed, got.Ospeed = 9600, 9600
		Apply(&got, b)
		// The same modes up to the end of the list, and nothing after.
		n := 0
		for n+5 <= len(b) && b[n] != 0 && b[n] < 160 {
			n += 5
		}
		var want unix.Termios
		want.Ispeed, want.Ospeed = 9600, 9600
		Apply(&want, append(b[:n:n], 0, 53, 0, 0, 0, 1))
		if got != want {
			t.Fatalf("modes after the end of the list were applied:\n%+v\n%+v", got, want)
		}
		if got.Ispeed != 9600 || got.Ospeed != 9600 {
			t.Fatalf("the speeds changed: %+v", got)
		}
		named := map[int]bool{}
		for _, i := range modeChars {
			named[i] = true
		}
		for i, c := range got.Cc {
			if c != 0 && !named[i] {
				t.Fatalf("control character %d set: %+v", i, got)
			}
		}
	})
}
