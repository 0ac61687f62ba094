package cli

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/offload"
)

// TestStepLines: each command an offload step can name has its words,
// and the steps read as offload wrote them when it spelled them itself.
func TestStepLines(t *testing.T) {
	for v := offload.VerbOffload; v <= offload.VerbLocalMove; v++ {
		if stepVerbs[v] == "" {
			t.Errorf("verb %d has no command words", v)
		}
	}
	for _, tt := range []struct {
		step offload.Step
		want string
	}{
		{offload.StoppedNext()[0], "start it again from its last hand-over: cocoonbox offload restart"},
		{offload.Step{"go ahead anyway with: ", offload.Command{Verb: offload.VerbOffload, Kind: "claude", Yes: true}}, "go ahead anyway with: cocoonbox offload --kind claude --yes"},
		{offload.Step{"install Claude Code in the box: ", offload.Command{Verb: offload.VerbInstallCLI, Kind: "claude", Box: "main"}}, "install Claude Code in the box: cocoonbox offload install-cli --kind claude --box main"},
		{offload.Step{"replace it: ", offload.Command{Verb: offload.VerbInstallCLI, Kind: "claude", Box: "main", Force: true}}, "replace it: cocoonbox offload install-cli --kind claude --box main --force"},
		{offload.Step{"watch it with: ", offload.Command{Verb: offload.VerbInbox, Wait: 60}}, "watch it with: cocoonbox offload inbox --wait 60"},
		{offload.Step{"(", offload.Command{Verb: offload.VerbRsh, Box: "main", Args: []string{"mv", "…"}}, ")"}, "(cocoonbox rsh main mv …)"},
		{offload.Step{offload.Command{Verb: offload.VerbRsh, Box: "main", Terminal: true, Args: []string{"tmux", "attach", "-t", "cb-off-k-claude"}}}, "cocoonbox rsh -t main tmux attach -t cb-off-k-claude"},
		{offload.Step{"opt out with: ", offload.Command{Verb: offload.VerbSecretsRemove, Args: []string{"ENTRY"}}}, "opt out with: cocoonbox offload secrets remove ENTRY"},
		{offload.Step{"end it: ", offload.Command{Verb: offload.VerbAbandon, Box: "b"}}, "end it: cocoonbox offload abandon --box b"},
		{offload.Step{"move it: ", offload.Command{Verb: offload.VerbLocalMove}}, "move it: cocoonbox localbox stop; export XDG_STATE_HOME=/srv/cocoonbox; cocoonbox localbox start"},
	} {
		if got := stepLine(tt.step); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// TestPrintFindingsPrintable: a finding's text, which the box half can
// write, reaches the terminal without a control character: an OSC 52
// (clipboard), a CSI as C1 (U+009B), a newline that would forge a line.
func TestPrintFindingsPrintable(t *testing.T) {
	var b strings.Builder
	printFindings(&b, []agentwire.Finding{{Check: "git\x1b]52;c;aGk=\a", Outcome: agentwire.Warn, Detail: "/a\nb \u009b2J"}})
	if got, want := b.String(), "  warn    git?]52;c;aGk=?: /a?b ?2J\n"; got != want {
		t.Errorf("printFindings = %q, want %q", got, want)
	}
}
