//go:build unix

package cli

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/offload"
)

// A SIGTERM to this process during back's wait ends its context and makes
// the stopped wait, or a stopped step of offload, back or abandon, exit
// 143 (128+15); an earlier failure keeps its code.
func TestBackStoppedExit(t *testing.T) {
	ctx, stop, code := signalExitContext()
	defer stop()
	if c := code(); c != 0 {
		t.Fatalf("code before any signal = %d, want 0", c)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	err := stoppedExit(&offload.Error{Code: offload.ExitFailed, Err: offload.ErrWaitStopped}, code())
	var oe *offload.Error
	if !errors.As(err, &oe) || oe.Code != 143 {
		t.Fatalf("got %v (code %d), want exit 143", err, oe.Code)
	}
	// An offload, back or abandon step that a signal stopped too.
	step := stoppedExit(&offload.Error{Code: offload.ExitFailed, Err: fmt.Errorf("%w during send; nothing changed here", offload.ErrInterrupted)}, code())
	if errors.As(step, &oe); oe.Code != 143 {
		t.Fatalf("an interrupted step got code %d, want 143", oe.Code)
	}
	other := stoppedExit(&offload.Error{Code: offload.ExitFailed, Err: errors.New("fetch failed")}, code())
	if errors.As(other, &oe); oe.Code != offload.ExitFailed {
		t.Fatalf("another failure got code %d, want %d", oe.Code, offload.ExitFailed)
	}
}
