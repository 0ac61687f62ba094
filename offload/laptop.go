package offload

import (
	"io"
	"time"
)

// Laptop is what offload, back and abandon share of the laptop half
// (contract "Offload, Mac side"): the repository, its store, the box
// service, what git and rsync over the shim inherit, and where the
// command reports. Set Repo, Store, Client, Environ and Shim; the rest
// may be nil.
type Laptop struct {
	Repo  *Repo
	Store Store
	// Client is the box service: its boxes and Exec.
	Client Client
	// Environ is the laptop's environment: rsync and git over the shim
	// inherit it (token included), local git and probes without the token.
	Environ []string
	// Shim is the ssh-like program rsync and git run to reach the box,
	// quoted as one word (QuoteCommand): cocoonbox-ssh.
	Shim string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// Progress receives the box half's progress; nil discards it.
	Progress io.Writer
	// Notice, when set, gets the one line that says what became of an
	// offload, back or abandon of the repository that was interrupted
	// (and, for back, the line it says before it waits for the
	// hand-over, whether or not stderr is a terminal).
	Notice func(line string)
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// AtStep, when set, is called before each step runs (StepFunc).
	AtStep StepFunc
}

func (l *Laptop) logf(format string, args ...any) {
	if l.Logf != nil {
		l.Logf(format, args...)
	}
}

func (l *Laptop) notice(line string) {
	if l.Notice != nil {
		l.Notice(line)
	}
}

func (l *Laptop) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// resumer finishes or undoes what an offload, back or abandon of the
// repository that died left.
func (l *Laptop) resumer() *resumer { return &resumer{*l} }
