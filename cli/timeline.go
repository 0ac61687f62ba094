package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
)

// timeline is -v of offload and back: each of its progress lines, and
// each call it makes to the box service with how long it took, on
// stderr with the time since the command began, whether or not stderr is
// a terminal, from the process's start (its first line, "connected",
// says what its start, opening the repository and the dial took). The
// rsync passes and git fetch run in processes of their own: the progress
// line that starts each, and the next, bound them.
type timeline struct {
	mu sync.Mutex
	w  io.Writer
	t0 time.Time
}

func newTimeline(w io.Writer) *timeline {
	t := &timeline{w: w, t0: processStart}
	t.logf("connected")
	return t
}

// processStart is when this process's packages were initialised: near
// enough its start for a timeline.
var processStart = time.Now()

// logf prints one line, "cocoonbox: +S.SSS s " and format's.
func (t *timeline) logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "cocoonbox: +%.3f s %s\n", time.Since(t.t0).Seconds(), fmt.Sprintf(format, args...))
}

// timedClient is a box client whose calls are lines of a timeline.
type timedClient struct {
	*box.Client
	tl *timeline
}

// Exec runs cmd and prints what it ran (callName) with its time.
func (c timedClient) Exec(ctx context.Context, cmd *box.Command) (box.ExitStatus, error) {
	t := time.Now()
	st, err := c.Client.Exec(ctx, cmd)
	c.tl.logf("box %s: %s (%.3f s)", cmd.Box, callName(cmd.Line), time.Since(t).Seconds())
	return st, err
}

// List lists the boxes and prints it with its time.
func (c timedClient) List(ctx context.Context) ([]box.Box, error) {
	t := time.Now()
	bs, err := c.Client.List(ctx)
	c.tl.logf("boxes list (%.3f s)", time.Since(t).Seconds())
	return bs, err
}

var agentVerbRE = regexp.MustCompile(`cocoonbox-agent offload ([a-z-]+)`)

// callName is a box command line in a few words: the box half's verbs it
// runs ("cocoonbox-agent offload read, status, send, read"), else its
// first two words.
func callName(line string) string {
	if ms := agentVerbRE.FindAllStringSubmatch(line, -1); ms != nil {
		verbs := make([]string, len(ms))
		for i, m := range ms {
			verbs[i] = m[1]
		}
		return "cocoonbox-agent offload " + strings.Join(verbs, ", ")
	}
	f := strings.Fields(line)
	return strings.Join(f[:min(2, len(f))], " ")
}
