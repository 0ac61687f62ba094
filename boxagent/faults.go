package boxagent

// The box CLI's faults, beside its status: a turn it ended on an error, a
// CLI that exited, a dialog, a sign-in screen or a stall that holds it.
// Each is kept in the session record and posted once to the outbox, so
// that status, inbox and back on the laptop say what only attaching to
// the pane showed before.

import (
	"bufio"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/printable"
)

// setFault records a fault of kind on r, with the CLI's line, at the
// current turn, and posts its outbox entry when it is new: a turn's
// failure once per turn, another fault once per kind and line. It
// returns the entry's watch line, or nil when nothing was posted. r is
// written by the caller.
func (c *Config) setFault(r *record, kind, line string) (*WatchLine, error) {
	line = printable.Line(strings.Join(strings.Fields(line), " "), agentwire.MaxFaultLine)
	if line == "" {
		line = "(the CLI said nothing of it)"
	}
	if f := r.Fault; f != nil && f.Kind == kind && (kind == agentwire.FaultTurn && f.Turn == r.TurnSeq || kind != agentwire.FaultTurn && f.Line == line) {
		return nil, nil
	}
	f := &agentwire.Fault{Kind: kind, Line: line, AtMS: nowMS(), Turn: r.TurnSeq}
	c.logf("the %s session of %s: %s", r.CLI, r.Repo, f.Summary())
	r.Fault = f
	r.OutboxSeq++
	if err := appendLine(c.outboxPath(r.Repo), agentwire.Entry{Seq: r.OutboxSeq, Kind: agentwire.EntryFault, OffloadID: r.OffloadID, CLI: r.CLI, TimeMS: f.AtMS, Body: f.Summary()}); err != nil {
		return nil, err
	}
	w := statusLine(r)
	w.Entry, w.Seq = agentwire.EntryFault, r.OutboxSeq
	return w, nil
}

// faultNow is r's fault as status and read answer it: with its age.
func faultNow(r *record) *agentwire.Fault {
	if r == nil || r.Fault == nil {
		return nil
	}
	f := *r.Fault
	f.AgeMS = max(0, nowMS()-f.AtMS)
	return &f
}

// newTurn notes that the CLI was given prompt seq now: a failed turn's
// fault is over.
func newTurn(r *record, seq int) {
	r.TurnSeq, r.TurnAtMS = seq, nowMS()
	if r.Fault != nil && r.Fault.Kind == agentwire.FaultTurn {
		r.Fault = nil
	}
}

// promptRE matches a line that ends in a shell prompt.
var promptRE = regexp.MustCompile(`[$#%>]\s*$`)

// exitLine is the line an exited CLI's fault gives: the last of its
// pane's last lines that is neither a shell prompt nor our command line,
// else that it exited.
func exitLine(title string, lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !promptRE.MatchString(l) && !strings.Contains(l, "offload event") {
			return l
		}
	}
	return title + " exited"
}

// LogTail is how much of the end of a session log the box reads for a
// failed turn.
const LogTail = 512 << 10

// readFailedTurn reads r's session log for a turn that failed after the
// CLI was given its current prompt, as the kind reads it; "" when none.
// seen keeps each log's size and time at the last read, so that an
// unchanged log is not read again.
func (c *Config) readFailedTurn(r *record, seen map[string]string) string {
	k := agentwire.KindOf(r.CLI)
	p := c.sessionLog(r)
	if p == "" {
		return ""
	}
	fi, err := os.Stat(p)
	if err != nil {
		return ""
	}
	stamp := strconv.FormatInt(fi.Size(), 10) + ":" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
	if seen[r.Repo] == stamp {
		return ""
	}
	seen[r.Repo] = stamp
	tail := readTail(p, LogTail)
	line, at, ok := k.ReadFailure("", nil, tail)
	// A failure the log dates before the prompt is an earlier turn's.
	if !ok || at != 0 && at < r.TurnAtMS {
		return ""
	}
	return line
}

// readTail is the last n bytes of the file at p, or nil.
func readTail(p string, n int64) []byte {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > n {
		f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return b
}

// sessionLog is the path of r's session log: the transcript its hooks
// named, else the newest log under the kind's TranscriptDir written since
// the session started whose first line the kind owns (kept in r then);
// "" when there is none yet.
func (c *Config) sessionLog(r *record) string {
	if r.TranscriptPath != "" {
		return r.TranscriptPath
	}
	k := agentwire.KindOf(r.CLI)
	dir := k.TranscriptDir(c.Home, r.Dir)
	if dir == "" {
		return ""
	}
	var best string
	var newest int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().UnixMilli() < r.StartedAtMS || fi.ModTime().UnixMilli() <= newest {
			return nil
		}
		if k.OwnsLog(firstLine(p), r.Dir) {
			best, newest = p, fi.ModTime().UnixMilli()
		}
		return nil
	})
	if best != "" {
		r.TranscriptPath = best
	}
	return best
}

// firstLine is the first line of the file at p (at most 1 MiB: codex's
// first line carries its instructions).
func firstLine(p string) []byte {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	l, _ := bufio.NewReaderSize(io.LimitReader(f, 1<<20), 64<<10).ReadBytes('\n')
	return bytes.TrimSpace(l)
}

// LogSearchEvery is every how many pane checks a session log not found
// yet is looked for under the kind's TranscriptDir.
const LogSearchEvery = 3

// ScreenCheckEvery is every how many pane checks (PaneCheckEvery) the
// pane of a working session is read for a dialog, a sign-in screen or a
// stall.
const ScreenCheckEvery = 3

// checkFaults looks for a running session's faults that no hook reports:
// a failed turn its session log shows (every check, for a kind without a
// failure hook or whose hooks are silent), and, every ScreenCheckEvery
// checks, what its pane shows. It reports whether r changed, and returns
// the watch lines to send.
func (ib *Inbox) checkFaults(r *record, n int, pane paneState) (changed bool, lines []*WatchLine) {
	c := ib.cfg
	if r.Status != StatusWorking && r.Status != StatusWaiting {
		return false, nil
	}
	k := agentwire.KindOf(r.CLI)
	// Until the session's log is found (it may be among many), it is
	// looked for every LogSearchEvery checks only.
	if r.Status == StatusWorking && (!hasFailureHook(k) || r.HookAtMS == 0) && (r.TranscriptPath != "" || n%LogSearchEvery == 0) {
		path := r.TranscriptPath
		ib.mu.Lock()
		line := c.readFailedTurn(r, ib.logSeen)
		ib.mu.Unlock()
		changed = r.TranscriptPath != path
		if line != "" {
			w, err := c.setFault(r, agentwire.FaultTurn, line)
			if err != nil {
				c.logf("record the failed turn of %s: %v", r.Repo, err)
			}
			turnEnd(r)
			ib.deliverQueued(r, pane)
			return true, append(lines, w)
		}
	}
	if n%ScreenCheckEvery != 0 || pane == paneExited {
		return changed, lines
	}
	kind, line := k.ReadScreen(c.tmuxScreen(SessionName(r.Repo, r.CLI)))
	switch {
	case kind != "":
		w, err := c.setFault(r, kind, line)
		if err != nil {
			c.logf("record the %s of %s: %v", kind, r.Repo, err)
		}
		if w != nil {
			changed = true
			lines = append(lines, w)
		}
	case r.Fault.OnScreen():
		// The person answered it, or the CLI got going again.
		c.logf("the %s session of %s: the %s is gone", r.CLI, r.Repo, r.Fault.What())
		r.Fault, changed = nil, true
	}
	return changed, lines
}

// hasFailureHook reports whether one of k's hooks says a turn failed.
func hasFailureHook(k agentwire.Kind) bool {
	for _, h := range k.Hooks() {
		if h.Failed {
			return true
		}
	}
	return false
}
