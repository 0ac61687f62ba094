package offload

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// Claude Code's refusal as root, as the real CLI printed it in the pane
// (cli/testdata/realcli/claude_asroot.txtar), makes the box user's next
// steps come first; any other exit names only restart and abandon.
func TestExitedErrorRoot(t *testing.T) {
	k := agentwire.KindOf("claude")
	refusal := []string{"--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"}
	for _, again := range []bool{false, true} {
		e := exitedError(k, "main", refusal, again)
		if !strings.Contains(e.Err.Error(), "refuses to run as root") {
			t.Errorf("again=%v: error %q does not name the root refusal", again, e.Err)
		}
		if len(e.Next) < 3 || !strings.Contains(e.Next[0], "cocoonbox localbox status") || !strings.Contains(e.Next[1], "XDG_STATE_HOME=/srv/cocoonbox") {
			t.Errorf("again=%v: next steps %q do not start with the box user's", again, e.Next)
		}
		if !strings.Contains(strings.Join(e.Next, "\n"), "cocoonbox offload restart") {
			t.Errorf("again=%v: next steps %q lost restart", again, e.Next)
		}
	}
	e := exitedError(k, "main", []string{"Error: no API key"}, false)
	if strings.Contains(e.Err.Error(), "root") || strings.Contains(strings.Join(e.Next, "\n"), "localbox") {
		t.Errorf("a CLI that did not refuse root got the root advice: %q %q", e.Err, e.Next)
	}
}
