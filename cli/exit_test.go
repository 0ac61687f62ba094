package cli

import (
	"errors"
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

// A command that a signal stopped says what it left in one line, with
// 128+N, in place of its context's error ("exec in main: context
// canceled", seen from offload status, inbox --wait and install-cli);
// with no signal the error stays.
func TestSignalled(t *testing.T) {
	canceled := errors.New("exec in main: context canceled")
	err := signalled(func() int { return 130 }, canceled, "interrupted before box main answered")
	var oe *offload.Error
	if !errors.As(err, &oe) || oe.Code != 130 || oe.Error() != "interrupted before box main answered" {
		t.Errorf("stopped by SIGINT: got %v (%#v), want exit 130 and the line", err, oe)
	}
	if got := signalled(func() int { return 0 }, canceled, "x"); got != canceled {
		t.Errorf("no signal: got %v, want the error as it is", got)
	}
	if got := signalled(func() int { return 143 }, nil, "x"); got != nil {
		t.Errorf("no error: got %v", got)
	}
}
