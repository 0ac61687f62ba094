package offload

import (
	"errors"
	"fmt"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/printable"
)

// backFault is the error of a back whose BACK the box CLI will not
// answer, as read (or the first read, before BACK) shows it: BACK's turn
// failed (a turn fault at BACK's inbox seq or later), the CLI waits for a
// person (a dialog, its sign-in screen, a stall), or its session stopped
// (the CLI exited). nil when none of these. Nothing changed here then: it
// says what is left where and how to see the CLI.
func (b *Backer) backFault(rec *Record, rd *agentwire.ReadResult, backSeq int) *Error {
	f := rd.Fault
	var err error
	switch {
	case rd.Status == "stopped":
		err = errors.New("the box CLI session of this offload stopped before it posted its back")
		if f != nil && f.Kind == agentwire.FaultExited {
			err = fmt.Errorf("the box CLI exited before it posted its back: %s", printable.Line(f.Line, agentwire.MaxFaultLine))
		}
	case f == nil:
		return nil
	case f.Kind == agentwire.FaultTurn && f.Turn >= backSeq:
		err = fmt.Errorf("the box CLI's BACK turn failed: %s", printable.Line(f.Line, agentwire.MaxFaultLine))
	case retriedOut(f):
		err = fmt.Errorf("the box CLI cannot reach its model: %s", printable.Line(f.Ago(), 0))
	case f.Waits():
		err = fmt.Errorf("the box CLI cannot take BACK (%s %s ago): %s", f.What(), agentwire.Age(time.Duration(f.AgeMS)*time.Millisecond), printable.Line(f.Line, agentwire.MaxFaultLine))
	default:
		return nil
	}
	e := &Error{Code: ExitFailed, Err: err, Next: []Step{
		{fmt.Sprintf("nothing changed here; the box's work stays in box %s in %s, and this offload's record in %s", rec.BoxName, rec.Dir, b.Store.recordPath(rec.Repo))},
		{"see the box CLI: ", AttachCommand(rec.BoxName, rec.Repo, rec.Kind), " (detach with Ctrl-b d)"},
	}}
	if rd.Status == "stopped" {
		e.Next = append(e.Next, stoppedNext...)
	} else {
		e.Next = append(e.Next, Step{"once it works again run ", cmdBack, " again, or end the offload, keeping the box's work in refs here: ", cmdAbandon})
	}
	return e
}

// retriedOut reports whether f is the CLI's retries of a failed model
// request that have lasted RetryBound.
func retriedOut(f *agentwire.Fault) bool {
	return f != nil && f.Kind == agentwire.FaultRetrying && time.Duration(f.AgeMS)*time.Millisecond >= RetryBound
}

// faultNotice is what back says before it sends BACK to a session whose
// last turn failed, or whose CLI retries a failed model request; "" for
// none.
func faultNotice(f *agentwire.Fault) string {
	switch {
	case f == nil:
	case f.Kind == agentwire.FaultTurn:
		return fmt.Sprintf("the box CLI's %s; BACK may fail the same way", printable.Line(f.Ago(), 0))
	case f.Kind == agentwire.FaultRetrying:
		return fmt.Sprintf("the box CLI is %s; back waits until its retries last %d s", printable.Line(f.Ago(), 0), int(RetryBound/time.Second))
	}
	return ""
}

// AttachCommand is the command that shows, on this terminal, the box CLI
// of repo key k and kind in box bx (docs/offload.md: cocoonbox rsh -t BOX
// tmux attach -t cb-off-<K>-<kind>).
func AttachCommand(bx, k, kind string) Command {
	return Command{Verb: VerbRsh, Box: bx, Terminal: true, Args: []string{"tmux", "attach", "-t", agentwire.TmuxSession(k, kind)}}
}
