package boxagent

// The journal of send: before each of its steps, send writes the step in
// the session record (record.Step), and it holds the repo's send.lock
// from its start to its end. A step in the record when no process holds
// send.lock was left by a send that died (the Exec cut when the laptop
// went, kill -9, a power loss); the next begin, send or end of the repo
// undoes it before its own work (resumeSend). docs/cocoonbox-agent.md
// "The journal" has the table.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/flock"
)

// The steps of send, in order (record.Step).
const (
	// StepRead reads the stream: files to stage/, secrets to
	// <secrets>.incoming.
	StepRead = "read"
	// StepIndex takes the bundle into the copy (index-pack, refs).
	StepIndex = "index"
	// StepCheck writes a linked worktree's HEAD and index, refreshes the
	// copy's index and checks the copy equals S.
	StepCheck = "check"
	// StepSecrets places the secrets and their links.
	StepSecrets = "secrets"
	// StepExcludes records the copy's ignored directories and writes
	// excludes and env.json.
	StepExcludes = "excludes"
	// StepTrust presets the CLI's trust of the copy.
	StepTrust = "trust"
	// StepStart hands the first prompt to the inbox, which starts the
	// session (and clears the step).
	StepStart = "start"
)

// sendLockWait bounds how long begin and end wait for a send that still
// runs: the local box ends a cut Exec's process group with SIGHUP, then
// SIGKILL 2 s later.
const sendLockWait = 15 * time.Second

func (c *Config) sendLockPath(k string) string { return filepath.Join(c.repoDir(k), "send.lock") }

// sendLock takes the repo's send.lock, waiting up to wait for a send that
// holds it; a send still holding it then is refused.
func (c *Config) sendLock(k string, wait time.Duration) (func(), error) {
	deadline := time.Now().Add(wait)
	for {
		unlock, err := lockMode(c.sendLockPath(k), flock.Exclusive|flock.NoWait)
		if !errors.Is(err, flock.ErrLocked) {
			return unlock, err
		}
		if time.Now().After(deadline) {
			return nil, refusedf("a send of %s is running in this box", k)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// step writes step as the journal of k's send before it runs, with f's
// changes to the record when f is not nil, then calls AtStep.
func (c *Config) step(k, step string, f func(r *record)) error {
	if _, err := c.update(k, func(r *record) (*record, error) {
		if r == nil {
			return nil, errors.New("the record went away")
		}
		r.Step = step
		if f != nil {
			f(r)
		}
		return r, nil
	}); err != nil {
		return err
	}
	if c.AtStep != nil {
		c.AtStep("send", step)
	}
	return nil
}

// resumeSend undoes what a send of k that died left, with the repo's
// send.lock held: the secrets (those placed, and those still arriving in
// .incoming) and their links go, stage/ is emptied, and the copy's git
// locks and half-written packs that its killed git left go; the record's
// step is cleared. The copy stays taken for its offload: the laptop gives
// it back (end) or begin takes it again. A send whose session started is
// not undone: the session is the inbox's.
func (c *Config) resumeSend(k string) error {
	r, err := c.readRecord(k)
	if err != nil || r == nil || r.Step == "" {
		return err
	}
	if !r.Started {
		c.logf("the send of offload %s was interrupted during %s: undoing it", r.OffloadID, r.Step)
		c.wipeSecrets(k, true)
		if err := emptyDir(c.stageDir(k)); err != nil {
			return err
		}
		if r.Step == StepIndex || r.Step == StepCheck {
			clearGitLocks(filepath.Join(r.Dir, ".git"))
		}
	}
	_, err = c.update(k, func(r *record) (*record, error) {
		if r == nil || r.Step == "" {
			return nil, nil
		}
		r.Step = ""
		if !r.Started {
			r.Secrets = nil
		}
		return r, nil
	})
	return err
}

// clearGitLocks removes, in a copy's git directory gd that no session
// uses, the lock files and temporary packs a git killed in send left:
// index.lock, HEAD.lock, packed-refs.lock, refs/**.lock and
// objects/pack/tmp_*. The laptop's rsync never brings them (it leaves out
// git's locks), and one left would fail every later send. Everything goes
// through an os.Root of gd: a link in the copy (refs, objects/pack) leads
// nothing out of it.
func clearGitLocks(gd string) {
	root, err := os.OpenRoot(gd)
	if err != nil {
		return
	}
	defer root.Close()
	for _, f := range []string{"index.lock", "HEAD.lock", "packed-refs.lock"} {
		root.Remove(f)
	}
	fsys := root.FS()
	tmp, _ := fs.Glob(fsys, "objects/pack/tmp_*")
	for _, p := range tmp {
		root.Remove(p)
	}
	fs.WalkDir(fsys, "refs", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			root.Remove(p)
		}
		return nil
	})
}

// holdOffload checks a begin's or send's repo key, kind and offload id,
// then holds the repo's send.lock as holdSend does.
func (c *Config) holdOffload(k, kind, id string) (func(), error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	return c.holdSend(k)
}

// holdSend takes k's send.lock, waiting up to sendLockWait for a send
// that holds it, and undoes what a send that died left; it returns the
// lock's release.
func (c *Config) holdSend(k string) (func(), error) {
	unlock, err := c.sendLock(k, sendLockWait)
	if err != nil {
		return nil, err
	}
	if err := c.resumeSend(k); err != nil {
		unlock()
		return nil, fmt.Errorf("undo the interrupted send: %w", err)
	}
	return unlock, nil
}
