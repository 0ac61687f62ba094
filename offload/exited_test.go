package offload

import (
	"slices"
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
		if len(e.Next) < 3 || !hasCommand(e.Next[0], Command{Verb: VerbLocalbox}) || !hasCommand(e.Next[1], Command{Verb: VerbLocalMove}) {
			t.Errorf("again=%v: next steps %s do not start with the box user's", again, nextText(e.Next...))
		}
		if !slices.ContainsFunc(e.Next, func(s Step) bool { return hasCommand(s, cmdRestart) }) {
			t.Errorf("again=%v: next steps %s lost restart", again, nextText(e.Next...))
		}
	}
	e := exitedError(k, "main", []string{"Error: no API key"}, false)
	if strings.Contains(e.Err.Error(), "root") || slices.ContainsFunc(e.Next, func(s Step) bool { return hasCommand(s, Command{Verb: VerbLocalbox}) }) {
		t.Errorf("a CLI that did not refuse root got the root advice: %q %s", e.Err, nextText(e.Next...))
	}
}
