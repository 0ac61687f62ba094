package agentwire

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Fault is what went wrong with a box CLI session, kept beside its status
// in the box's session record and shown in status and read (the
// contract's statuses stay as they are: a turn that failed still ends in
// idle, a CLI that exited in stopped). Every field is the box's word; Line
// is box text.
type Fault struct {
	// Kind is one of FaultTurn, FaultExited, FaultDialog, FaultLogin and
	// FaultStalled.
	Kind string `json:"kind"`
	// Line is what the CLI said of it, one line the box made printable
	// and cut to MaxFaultLine runes (print it through internal/printable
	// all the same): "API Error: Unable to connect to API
	// (ConnectionRefused)".
	Line string `json:"line"`
	// AtMS is when the box agent learned of it, the box's clock in Unix
	// milliseconds.
	AtMS int64 `json:"at_ms"`
	// AgeMS is how long before the answer that was, in milliseconds, so
	// that the laptop says how long ago without comparing clocks.
	AgeMS int64 `json:"age_ms"`
	// Turn is the inbox seq of the prompt the CLI was on (for FaultTurn,
	// the prompt whose turn failed); 0 before the first.
	Turn int `json:"turn,omitempty"`
}

// The kinds of Fault.
const (
	// FaultTurn: the CLI ended a turn on an error (the model API refused,
	// failed or could not be reached); the session is at its prompt.
	FaultTurn = "turn"
	// FaultExited: the CLI's process exited without its session-end hook
	// (a crash, a kill, a refusal); the session is stopped.
	FaultExited = "exited"
	// FaultDialog: the CLI shows a dialog that waits for a person.
	FaultDialog = "dialog"
	// FaultLogin: the CLI shows its sign-in screen.
	FaultLogin = "login"
	// FaultStalled: the CLI is in its turn but waits for something only a
	// person fixes (codex waiting for the network after its retries).
	FaultStalled = "stalled"
	// FaultRetrying: the CLI is in its turn and retries a failed model
	// request itself; the turn fails when its retries run out.
	FaultRetrying = "retrying"
)

// MaxFaultLine is the most runes of a Fault's Line.
const MaxFaultLine = 300

// Waits reports whether the fault holds the CLI until a person acts: a
// dialog, its sign-in screen, or a stall.
func (f *Fault) Waits() bool {
	return f != nil && (f.Kind == FaultDialog || f.Kind == FaultLogin || f.Kind == FaultStalled)
}

// OnScreen reports whether the fault is one the CLI's pane shows (one
// that Waits, or its retries): it lasts only while the pane shows it.
func (f *Fault) OnScreen() bool { return f.Waits() || f != nil && f.Kind == FaultRetrying }

// What says what happened, for people: "last turn failed", "CLI exited",
// "dialog shown", "sign-in screen shown", "stalled", "retrying".
func (f *Fault) What() string {
	switch f.Kind {
	case FaultTurn:
		return "last turn failed"
	case FaultExited:
		return "CLI exited"
	case FaultDialog:
		return "dialog shown"
	case FaultLogin:
		return "sign-in screen shown"
	case FaultStalled:
		return "stalled"
	case FaultRetrying:
		return "retrying"
	}
	return f.Kind
}

// Summary is the fault in one line without its time: "last turn failed:
// API Error: ...". The box's inbox entry of a fault has it as its body.
func (f *Fault) Summary() string { return f.What() + ": " + f.Line }

// Ago is the fault with its age, for a status line: "last turn failed 40
// s ago: API Error: ...", "retrying for 20 s: API error".
func (f *Fault) Ago() string {
	age := Age(time.Duration(f.AgeMS) * time.Millisecond)
	if f.Kind == FaultRetrying {
		return fmt.Sprintf("%s for %s: %s", f.What(), age, f.Line)
	}
	return fmt.Sprintf("%s %s ago: %s", f.What(), age, f.Line)
}

// Age is d as people read an age: "40 s", "3 min", "2 h", "5 d".
func Age(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d d", int(d/(24*time.Hour)))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d h", int(d/time.Hour))
	case d >= 2*time.Minute:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	}
	return fmt.Sprintf("%d s", int(d/time.Second))
}

// EntryFault is the kind of the outbox entry the box agent posts itself,
// once per fault, whose body is the fault's Summary (beside the box
// agent's progress, question and back).
const EntryFault = "failure"

// TmuxSession is the tmux session the box CLI of repo key k and kind
// runs in: cb-off-<K>-<kind> (contract "Box CLI in tmux").
func TmuxSession(k, kind string) string { return "cb-off-" + k + "-" + kind }

// jsonLines calls f on each line of log from the last to the first,
// until f returns true. A line cut at the start of log (the tail of a
// file) is passed too, and fails to decode.
func jsonLines(log []byte, f func(line []byte) bool) {
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(nil, len(log)+1)
	for sc.Scan() {
		lines = append(lines, sc.Bytes())
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 && f(l) {
			return
		}
	}
}

// screenLine is the first of lines that contains one of marks, trimmed,
// or "".
func screenLine(lines []string, marks ...string) string {
	for _, l := range lines {
		for _, m := range marks {
			if strings.Contains(l, m) {
				return strings.TrimSpace(l)
			}
		}
	}
	return ""
}

// retryText is a screen line that says what a CLI retries, without its
// spinner and its count ("✻ API error · Retrying in 8s · attempt 5/10"
// gives "API error"), so that it stays the same while the retries last.
func retryText(l, cut string) string {
	l, _, _ = strings.Cut(l, cut)
	return strings.TrimFunc(l, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '(' && r != ')' })
}

// msOf reads an RFC 3339 time as Unix milliseconds, 0 when it is none.
func msOf(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}
