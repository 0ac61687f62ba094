package cli

import (
	"testing"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/boxagent"
	"github.com/cocoonbox/cocoonbox/offload"
	"github.com/cocoonbox/cocoonbox/shim"
)

// TestExitTable keeps the codes offload's errors carry equal to
// cocoonbox's table, and cocoonbox-agent's, and the ssh-like 255 as
// docs/cli.md says.
func TestExitTable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int
	}{
		{"offload.ExitFailed", offload.ExitFailed, ExitFailure},
		{"offload.ExitRefused", offload.ExitRefused, ExitRefused},
		{"offload.ExitConfirm", offload.ExitConfirm, ExitNeedsYes},
		{"shim.ExitFailure", shim.ExitFailure, 255},
		{"agent usage", (&boxagent.Error{Code: agentwire.CodeUsage}).ExitCode(), ExitUsage},
		{"agent refused", (&boxagent.Error{Code: agentwire.CodeRefused}).ExitCode(), ExitRefused},
		{"agent failure", (&boxagent.Error{Code: "failed"}).ExitCode(), ExitFailure},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
