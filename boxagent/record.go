package boxagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/flock"
	"github.com/cocoonbox/cocoonbox/internal/jsonfile"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// record is a repo key's session record, <offload dir>/<K>/session.json.
// It is the truth about the copy and its session; every change is a locked
// read-modify-write, so verbs and the inbox can both make changes.
type record struct {
	Repo string `json:"repo"`
	Name string `json:"name"`
	Dir  string `json:"dir"`
	CLI  string `json:"cli"`
	// OffloadID is the offload the copy is taken for; "" when released.
	OffloadID string `json:"offload_id"`
	NoRepo    bool   `json:"no_repo,omitempty"`
	// Base is S, the snapshot the last send checked the copy against.
	Base string `json:"base,omitempty"`
	// Started says a CLI session started on the copy since the last end:
	// the copy is unreturned (busy while Status is not stopped).
	Started     bool   `json:"started"`
	Status      string `json:"status"`
	StartedAtMS int64  `json:"started_at_ms,omitempty"`
	HookAtMS    int64  `json:"hook_at_ms,omitempty"`
	// CLIPid is the CLI's pid, as last seen holding its pane's terminal;
	// 0 until then.
	CLIPid         int      `json:"cli_pid,omitempty"`
	TranscriptPath string   `json:"transcript_path,omitempty"`
	Question       bool     `json:"question,omitempty"`
	Queue          []queued `json:"queue,omitempty"`
	InboxSeq       int      `json:"inbox_seq"`
	OutboxSeq      int      `json:"outbox_seq"`
	// Ignored are the copy's git-ignored directories, absolute, for
	// excludes.
	Ignored []string `json:"ignored,omitempty"`
	// Secrets are the placed secret entries, names only.
	Secrets []string `json:"secrets,omitempty"`
	// ExitLines are the last lines of the session's pane when its CLI
	// was found exited; nil while it runs.
	ExitLines []string `json:"exit_lines,omitempty"`
	// Thread is the CLI's thread id of the session, for a kind whose
	// hooks name threads (agentwire.Hook's Thread: codex's notify), from
	// its first hook of the first prompt; other threads' hooks are
	// ignored. Its JSON name is the one records were first written with.
	Thread string `json:"codex_thread,omitempty"`
	// Step is the journal of send: the step of the send of OffloadID that
	// runs, written before it does (sendSteps); "" once the session has
	// started, or when no send runs. One left with no send running (it
	// holds the repo's send.lock) is undone by the next begin, send or
	// end (resumeSend).
	Step string `json:"step,omitempty"`
	// TurnSeq is the inbox seq of the prompt the CLI was last given, and
	// TurnAtMS when (or when its prompt hook came after).
	TurnSeq  int   `json:"turn_seq,omitempty"`
	TurnAtMS int64 `json:"turn_at_ms,omitempty"`
	// Fault is what went wrong with the session beside its status
	// (faults.go); nil when nothing did.
	Fault *agentwire.Fault `json:"fault,omitempty"`
	// Ending says end is ending the CLI: its exit is no fault.
	Ending bool `json:"ending,omitempty"`
}

// queued is a message waiting for the session's next idle.
type queued struct {
	Seq  int    `json:"seq"`
	Back bool   `json:"back,omitempty"`
	Body string `json:"body"`
}

// copyState is the record's copy state; a nil record, or a copy whose
// directory is gone, is absent.
func (r *record) copyState() string {
	if r == nil {
		return CopyAbsent
	}
	if fi, err := os.Stat(r.Dir); err != nil || !fi.IsDir() {
		return CopyAbsent
	}
	if !r.Started {
		return CopyMirror
	}
	if r.Status != StatusStopped {
		return CopyBusy
	}
	return CopyUnreturned
}

// running reports whether the record's session is not stopped.
func (r *record) running() bool { return r != nil && r.Started && r.Status != StatusStopped }

func (c *Config) recordPath(k string) string { return filepath.Join(c.repoDir(k), "session.json") }

// readRecord returns k's record, or nil when there is none. One that
// does not decode (cut short, or written over by what runs in the box) is
// taken as brokenRecord says, so that it blocks neither this repo's end
// nor any other repo's verbs; the next write of it replaces it.
func (c *Config) readRecord(k string) (*record, error) {
	var r record
	ok, err := jsonfile.Read(c.recordPath(k), &r)
	if undecodable(err) {
		return c.brokenRecord(k, err), nil
	}
	if !ok {
		return nil, err
	}
	return &r, nil
}

// readSettled is readRecord once no update of k is under way: a reader
// that found an outbox entry then sees the record the same update wrote
// (update appends the entry before it writes the record back). It must
// not be called under k's lock.
func (c *Config) readSettled(k string) (*record, error) {
	if _, err := os.Lstat(c.repoDir(k)); err == nil {
		unlock, err := lockMode(filepath.Join(c.repoDir(k), ".lock"), 0)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	return c.readRecord(k)
}

// undecodable reports whether err is jsonfile.Read's for a file that is
// not the JSON it should be: or no regular file (a FIFO, a link to a
// device), or one past jsonfile.MaxSize, which it refuses unread.
func undecodable(err error) bool {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var notRegular *safefile.NotRegularError
	var tooLarge *safefile.TooLargeError
	return errors.As(err, &syn) || errors.As(err, &typ) || errors.As(err, &notRegular) || errors.As(err, &tooLarge)
}

// brokenRecord stands for k's record that does not decode (why): the copy
// index.json names for k, its session stopped with an exited fault that
// says why, the CLI whose tmux session of k is alive (end ends it), so
// that status shows it and abandon keeps the copy's work and ends it.
// nil when index.json names no copy for k either.
func (c *Config) brokenRecord(k string, why error) *record {
	idx := map[string]string{}
	if _, err := jsonfile.Read(filepath.Join(c.OffloadDir(), "index.json"), &idx); err != nil || idx[k] == "" {
		return nil
	}
	at := nowMS()
	if fi, err := os.Stat(c.recordPath(k)); err == nil {
		at = fi.ModTime().UnixMilli()
	}
	r := &record{Repo: k, Name: idx[k], Dir: c.copyDir(idx[k]), Started: true, Status: StatusStopped,
		InboxSeq: lastSeq(c.inboxPath(k)), OutboxSeq: lastSeq(c.outboxPath(k)),
		Fault: &agentwire.Fault{Kind: agentwire.FaultExited, Line: fmt.Sprintf("the box agent's record of this session does not read (%v): taken as stopped", why), AtMS: at}}
	for _, kind := range agentwire.Kinds() {
		if c.tmuxAlive(SessionName(k, kind.Name())) {
			r.CLI = kind.Name()
		}
	}
	return r
}

func (c *Config) writeRecord(r *record) error {
	if err := os.MkdirAll(c.repoDir(r.Repo), 0o700); err != nil {
		return err
	}
	return jsonfile.Write(c.recordPath(r.Repo), r, 0o600)
}

// lock takes an exclusive flock on path (created 0600, and its directory
// 0700) and returns its release.
func lock(path string) (func(), error) {
	return lockMode(path, flock.Exclusive)
}

func lockMode(path string, mode flock.Mode) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return flock.Hold(path, mode)
}

// update runs f on k's record (nil when there is none) under the repo's
// lock, and writes the record back when f returns it.
// A record that does not decode is taken as readRecord takes it, so
// jsonfile.Update, which fails on it, is not used here.
func (c *Config) update(k string, f func(r *record) (*record, error)) (*record, error) {
	unlock, err := lock(filepath.Join(c.repoDir(k), ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	r, err := c.readRecord(k)
	if err != nil {
		return nil, err
	}
	out, err := f(r)
	if err != nil || out == nil {
		return out, err
	}
	return out, c.writeRecord(out)
}

// records lists every record of the box, by repo key.
func (c *Config) records() ([]*record, error) {
	ents, err := os.ReadDir(c.OffloadDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*record
	for _, e := range ents {
		if !e.IsDir() || !ValidRepoKey(e.Name()) {
			continue
		}
		r, err := c.readRecord(e.Name())
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// lastSeq is the largest seq of the JSON lines in path (an inbox or an
// outbox), 0 when none: where a record made again goes on numbering.
func lastSeq(path string) int {
	b, _ := os.ReadFile(path)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		var e struct {
			Seq int `json:"seq"`
		}
		if json.Unmarshal([]byte(l), &e) == nil {
			n = max(n, e.Seq)
		}
	}
	return n
}

// index is <offload dir>/index.json: repo key → name. One that does not
// decode is made again from the records, which hold each name too.
func (c *Config) readIndex() (map[string]string, error) {
	idx := map[string]string{}
	_, err := jsonfile.Read(filepath.Join(c.OffloadDir(), "index.json"), &idx)
	if undecodable(err) {
		c.logf("index.json does not read (%v): made again from the records", err)
		recs, rerr := c.records()
		if rerr != nil {
			return nil, rerr
		}
		idx = map[string]string{}
		for _, r := range recs {
			if r.Name != "" {
				idx[r.Repo] = r.Name
			}
		}
		return idx, nil
	}
	if err != nil {
		return nil, err
	}
	return idx, nil
}

// updateIndex changes the index and rewrites excludes from every record,
// under the offload directory's lock.
func (c *Config) updateShared(f func(idx map[string]string)) error {
	if err := os.MkdirAll(c.OffloadDir(), 0o700); err != nil {
		return err
	}
	if err := os.Chmod(c.OffloadDir(), 0o700); err != nil {
		return err
	}
	unlock, err := lock(filepath.Join(c.OffloadDir(), ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := c.readIndex()
	if err != nil {
		return err
	}
	if f != nil {
		f(idx)
		if err := jsonfile.Write(filepath.Join(c.OffloadDir(), "index.json"), idx, 0o600); err != nil {
			return err
		}
	}
	recs, err := c.records()
	if err != nil {
		return err
	}
	var lines []string
	for _, r := range recs {
		lines = append(lines, r.Ignored...)
	}
	sort.Strings(lines)
	data := strings.Join(lines, "\n")
	if data != "" {
		data += "\n"
	}
	return atomicfile.WriteFile(filepath.Join(c.OffloadDir(), "excludes"), []byte(data), 0o600)
}
