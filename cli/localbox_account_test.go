package cli

import (
	"errors"
	"testing"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// account add on a local box not served by root exits 3 (refused,
// nothing changed); other failures stay 1.
func TestAccountRefusedExit(t *testing.T) {
	ee, ok := errors.AsType[*ExitError](refusedAccounts(localbox.ErrNeedsRoot))
	if !ok || ee.Code != ExitRefused {
		t.Errorf("refusedAccounts(ErrNeedsRoot) = %v, want exit %d", ee, ExitRefused)
	}
	if _, ok := errors.AsType[*ExitError](refusedAccounts(errors.New("other"))); ok {
		t.Errorf("another failure got an exit status of its own")
	}
}
