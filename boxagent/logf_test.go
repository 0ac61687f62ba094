package boxagent

import (
	"fmt"
	"testing"
)

// A record field the box user wrote (a repository's name with a newline
// and an escape) reaches the log as one line with neither.
func TestLogfOneEscapedLine(t *testing.T) {
	var got []string
	c := &Config{Logf: func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }}
	c.logf("the %s session of %s has exited", "claude", "r\nroot2::0:0::/root:/bin/bash\n#\x1b]52;c;QUFB\x07")
	want := "the claude session of r?root2::0:0::/root:/bin/bash?#?]52;c;QUFB? has exited"
	if len(got) != 1 || got[0] != want {
		t.Errorf("logged %q, want [%q]", got, want)
	}
}
