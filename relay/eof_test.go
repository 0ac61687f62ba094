package relay

import (
	"io"
	"testing"
)

// TestEOFTracker: the eof line ends a relay's reads once the bytes it
// counts have been read, whether it comes before them or after; other
// stderr lines go on to stderr.
func TestEOFTracker(t *testing.T) {
	for _, lineFirst := range []bool{true, false} {
		r, w := io.Pipe()
		var stderr limitedBuffer
		tr := &eofTracker{w: w, at: -1, stderr: &stderr}
		lines := eofLines{tr}
		got := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(r)
			got <- string(b)
		}()
		if lineFirst {
			lines.Write([]byte("a warning\neof 6"))
			lines.Write([]byte("\n"))
		}
		tr.Write([]byte{Ready})
		tr.Write([]byte("hello"))
		if !lineFirst {
			lines.Write([]byte("a warning\neof 6\n"))
		}
		// Bytes after the count (none should come) are dropped.
		tr.Write([]byte("late"))
		if s := <-got; s != "\x06hello" {
			t.Errorf("line first %v: read %q, want the ready byte and hello, then EOF", lineFirst, s)
		}
		if l := stderr.lastLine(); l != "a warning" {
			t.Errorf("line first %v: stderr's last line %q, want the warning", lineFirst, l)
		}
	}
}
