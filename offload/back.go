package offload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// Back's bounds (contract "Back, Mac side" 2, and seeds/000).
const (
	// BackTimeout bounds the wait for the box agent's back entry.
	BackTimeout = 600 * time.Second
	// ResendAfter is how long a pasted BACK may draw no hook while the
	// session says working before BACK is sent again with --interrupt.
	ResendAfter = 60 * time.Second
	// RetryBound is how long the box CLI may retry a failed model request
	// (a retrying fault's age) before back takes it as a failure: longer
	// than a blip of the network or an overloaded API, shorter than the
	// CLIs' own retries (Claude Code's last about 3 minutes).
	RetryBound = 60 * time.Second
)

// Backer brings an offload's work home (contract "Back, Mac side"). Set
// the Laptop as it says.
type Backer struct {
	Laptop
}

// ErrWaitStopped is the error of a back whose context ended while it
// waited for the box agent's hand-over: nothing changed here. Its Error
// has waitStoppedNext for next step.
var ErrWaitStopped = errors.New("stopped waiting for the box agent's hand-over; nothing changed here")

// waitStoppedNext is the next step of a back whose wait was stopped.
var waitStoppedNext = Step{cmdBack, " again resumes the wait, ", cmdAbandon, " gives the box's work up"}

// BackResult is a finished back.
type BackResult struct {
	Record *Record
	Merge  *MergeResult
	// Body is the box agent's hand-over; BackPath keeps it.
	Body string
	// Resent is true when BACK was sent again with --interrupt.
	Resent bool
}

// Run brings the work home: BACK, the wait for the back entry, git fetch,
// the merge, end. It changes nothing here before the merge, and the merge
// changes nothing that it cannot account for. The journal names each step
// before it runs; what a back, offload or abandon that died left is
// finished or undone first (Notice says which).
func (b *Backer) Run(ctx context.Context) (*BackResult, error) {
	res, err := b.run(ctx)
	return res, stoppedBefore(ctx, err, "its checks")
}

func (b *Backer) run(ctx context.Context) (*BackResult, error) {
	r := b.Repo
	// One of offload, back and abandon at a time for a repo.
	unlock, err := b.Store.lockRepo(r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rz, err := b.resumer().load(ctx, b.Notice)
	if err != nil {
		return nil, err
	}
	rec := rz.Rec
	if rec == nil && rz.Back != nil {
		// The back that was interrupted is finished now.
		m := &MergeResult{Outcome: rz.Back.Outcome, Head: rz.Back.MoveTo, Branch: rz.Back.Branch, Reason: rz.Back.Reason}
		body, _, _ := safefile.ReadRegular(b.Store.BackPath(r.Key), safefile.MaxSize)
		return &BackResult{Record: rz.Was, Merge: m, Body: string(body)}, nil
	}
	if rec == nil {
		e := &Error{Code: ExitRefused, Err: ErrNoRecord}
		if rz.Line != "" {
			e.Next = []Step{{"offload it again: ", Command{Verb: VerbOffload, Kind: "KIND"}}}
		} else if _, err := os.Stat(b.Store.BackPath(r.Key)); err == nil {
			e.Next = []Step{{"the last back already came home; its hand-over is " + b.Store.BackPath(r.Key)}}
		} else {
			e.Next = []Step{{"offload it first: ", Command{Verb: VerbOffload, Kind: "KIND"}, "; what a box runs: ", Command{Verb: VerbStatus, Box: "BOX"}}}
		}
		return nil, e
	}
	// The version check and the haves below are each one git: they run
	// side by side.
	versionErr := make(chan error, 1)
	go func() { versionErr <- gitAtLeast(ctx, r.git, 2, 38) }()
	haves, havesErr := r.haves(ctx, rec.ID)
	if err := <-versionErr; err != nil {
		return nil, refused(err, Step{"install git 2.38 or later (back uses git merge-tree --write-tree)"})
	}
	agent := &Agent{Exec: b.Client, Box: rec.BoxName, Progress: b.Progress}
	res := &BackResult{Record: rec}
	// stopped is the failure of step, which a signal may have cut short
	// (then nothing changed here); the journal no longer names it.
	stopped := func(step string, err error) error {
		if ctx.Err() != nil {
			return interrupted(step, "nothing changed here", Step{"run ", cmdBack, " again to go on"})
		}
		return err
	}
	if err := b.journal(ctx, rec, StepWait); err != nil {
		// A signal while it waited for record.lock.
		return nil, stopped(StepWait, err)
	}
	// The box's history comes with its back as a bundle when it can
	// (BundleAsk), else by git fetch below.
	ask := &BundleAsk{Path: filepath.Join(b.Store.RepoDir(r.Key), backBundle), Haves: haves}
	if havesErr != nil {
		ask = nil
	}
	defer os.Remove(filepath.Join(b.Store.RepoDir(r.Key), backBundle))
	entry, bundled, err := b.waitBack(ctx, agent, rec, res, ask)
	if err != nil {
		b.Store.settle(rec)
		return nil, GoneError(ctx, b.Client, rec, err)
	}
	res.Body = entry.Body

	if err := b.journal(ctx, rec, StepFetch); err != nil {
		return nil, err
	}
	// end runs beside the fetch and the merge, so that its round trip
	// and the CLI's exit cost no time of their own; back waits for it
	// before it returns. When another git holds the index lock now, the
	// merge will change nothing, and the box session goes on: then end
	// waits until the merge holds the lock. The copy stays in the box
	// after end, so whatever else stops the fetch or the merge, back
	// again still finds the box's back, fetches and merges, and ends the
	// box session again (end is the same when it has ended).
	var ended chan error
	startEnd := func() {
		if ended == nil {
			b.logf("end")
			ended = make(chan error, 1)
			go func() { ended <- agent.End(ctx, r.Key) }()
		}
	}
	waitEnd := func() error {
		if ended == nil {
			return nil
		}
		return <-ended
	}
	if !r.indexLocked() {
		startEnd()
	}
	backRef := RefBack + rec.ID
	refspecs := []string{"+refs/heads/*:" + RefBox + "*", "+" + backRef + ":" + backRef}
	fetched := false
	if bundled != nil {
		// git fetch of the bundle checks that this repository has every
		// commit it names as a prerequisite; one it cannot take is
		// fetched from the box instead.
		b.logf("fetch from the bundle that came with the back")
		_, err := r.git.run(ctx, nil, append([]string{"fetch", "-q", "--no-tags", "--no-write-fetch-head", ask.Path}, refspecs...)...)
		fetched = err == nil && r.boxBranches(ctx, bundled.Branches) == nil
	}
	if !fetched {
		b.logf("fetch from %s:%s", rec.BoxName, remotePath(rec.Dir, rec.Name))
		err = r.fetchBox(ctx, b.Environ, b.Shim, rec.BoxName+":"+remotePath(rec.Dir, rec.Name), refspecs)
	}
	if err != nil {
		waitEnd()
		b.Store.settle(rec)
		return nil, stopped(StepFetch, &Error{Code: ExitFailed, Err: err, Next: []Step{backAgain}})
	}
	back, err := r.git.line(ctx, "rev-parse", "--verify", backRef+"^{commit}")
	if err != nil {
		waitEnd()
		b.Store.settle(rec)
		return nil, stopped(StepFetch, &Error{Code: ExitFailed, Err: fmt.Errorf("the box has no %s: %w", backRef, err)})
	}
	if err := b.journal(ctx, rec, StepMerge); err != nil {
		waitEnd()
		return nil, err
	}
	b.logf("merge")
	// From here on only a git that fails unexpectedly stops the merge.
	m, err := r.mergeBackHooks(ctx, rec.ID, rec.Base, back, b.now(), &mergeHooks{
		locked: startEnd,
		applying: func(j *MergeJournal) error {
			rec.Merge = j
			return b.journal(ctx, rec, StepApply)
		},
	})
	endErr := waitEnd()
	if err != nil {
		// The merge changed nothing, or its *Error says what it left: the
		// journal no longer names a step to finish.
		rec.Merge = nil
		b.Store.settle(rec)
	}
	if errors.Is(err, ErrIndexLocked) {
		e := &Error{Code: ExitFailed, Err: err, Next: []Step{{"nothing changed; when no git is running here, remove " + r.GitDir + "/index.lock and run ", cmdBack, " again"}}}
		if ok, _ := r.git.ok(ctx, "rev-parse", "-q", "--verify", RefPreBackWork+rec.ID); ok {
			e.Next = append(e.Next, Step{"if an earlier ", cmdBack, " was killed while it changed the work tree, the lock is its: git restore --source=" +
				RefPreBackWork + rec.ID + " --worktree -- :/ puts back your files as they were before it"})
		}
		return nil, e
	}
	var oe *Error
	if errors.As(err, &oe) {
		return nil, oe
	}
	if err != nil {
		return nil, stopped(StepMerge, &Error{Code: ExitFailed, Err: err})
	}
	res.Merge = m
	if _, err := b.Store.EnsureRepoDir(r.Key); err == nil {
		atomicfile.WriteFile(b.Store.BackPath(r.Key), []byte(entry.Body), 0o600)
	}
	j := rec.Merge
	if j == nil {
		j = &MergeJournal{}
	}
	j.Outcome, j.Branch, j.Reason = m.Outcome, m.Branch, m.Reason
	if m.Head != "" {
		j.MoveTo = m.Head
	}
	rec.Merge = j
	if err := b.journal(ctx, rec, StepEnd); err != nil {
		return res, err
	}
	if ctx.Err() != nil {
		// Interrupted while the work tree changed, which it finished; the
		// end beside it was cut short too, or not.
		return res, interrupted(StepEnd, fmt.Sprintf("the box's work is here (%s), but the box session may still run", m.Outcome),
			Step{"run ", cmdBack, " again to end it"})
	}
	if endErr != nil {
		return res, &Error{Code: ExitFailed, Err: fmt.Errorf("the box's work is here (%s), but ending the box session failed: %w", m.Outcome, endErr),
			Next: []Step{{"run ", cmdBack, " again to end it"}}}
	}
	if err := b.Store.RemoveRecord(r.Key); err != nil {
		return res, err
	}
	return res, nil
}

// backBundle is the file in the repository's directory that the box's
// history comes in with its back (BundleAsk), while back runs.
const backBundle = "back.bundle"

// haves are the commits the bundle of back's first Exec may leave out:
// this repository's branches, HEAD, and S of offload id.
func (r *Repo) haves(ctx context.Context, id string) ([]string, error) {
	out, err := r.git.run(ctx, nil, "for-each-ref", "--format=%(objectname)", "refs/heads/", RefOffload+id)
	if err != nil {
		return nil, err
	}
	haves := strings.Fields(string(out))
	// HEAD names one of those branches, or, detached, a commit of its
	// own, which its file holds: read there, not by a git of its own
	// (a have is a hint: the box keeps those that are commits it has).
	if b, err := os.ReadFile(filepath.Join(r.GitDir, "HEAD")); err == nil {
		if head := strings.TrimSpace(string(b)); isOID(head) {
			haves = append(haves, head)
		}
	}
	return haves, nil
}

// boxBranches sets RefBox's ref of each of the copy's branches (refs/heads/
// <name> to its commit), as a fetch of +refs/heads/*:refs/cocoonbox/box/*
// from the box does: the bundle leaves out the branches this repository
// has already. A commit that is not here fails it.
func (r *Repo) boxBranches(ctx context.Context, branches map[string]string) error {
	var b strings.Builder
	for _, ref := range slices.Sorted(maps.Keys(branches)) {
		fmt.Fprintf(&b, "update %s%s %s\n", RefBox, strings.TrimPrefix(ref, "refs/heads/"), branches[ref])
	}
	_, err := r.git.run(ctx, strings.NewReader(b.String()), "update-ref", "--stdin")
	return err
}

// fetchBox fetches specs from the box copy at src (BOX:PATH) with git
// over the shim, as the contract's back does ("Back, Mac side" 3). Its
// error is "git fetch SRC: " and, when the shim failed (a lost
// connection), the shim's line, as rsync's is (shellLine), not git's
// "fatal: early EOF"; else git's cause line.
func (r *Repo) fetchBox(ctx context.Context, environ []string, shim, src string, specs []string) error {
	fetch := git{dir: r.Top, env: append(HostEnv(environ, true), "GIT_SSH_COMMAND="+shim, "GIT_SSH_VARIANT=simple"), prep: r.git.prep}
	_, err := fetch.run(ctx, nil, append([]string{"fetch", "-q", "--no-tags", "--no-write-fetch-head", src}, specs...)...)
	var ge *gitcmd.Error
	if errors.As(err, &ge) {
		// Without our options and refspecs, which would crowd the
		// shim's line out of the one line shown.
		ge.Args = []string{"fetch", src}
		ge.Cause = shellLine(shim, ge.Stderr)
	}
	return err
}

// journal writes rec as the journal of the back's step before it runs.
func (b *Backer) journal(ctx context.Context, rec *Record, step string) error {
	return b.Store.journal(ctx, rec, OpBack, step, b.AtStep)
}

// backAgent is what waitBack needs of the box half.
type backAgent interface {
	BackStart(ctx context.Context, key, id, path string, wait time.Duration, ask *BundleAsk) (*BackStart, error)
	Read(ctx context.Context, key string, since int64, wait time.Duration) (*agentwire.ReadResult, error)
	SendBack(ctx context.Context, key string, interrupt bool) (*agentwire.MessageResult, error)
	Status(ctx context.Context, key string) ([]agentwire.Session, error)
}

// waitBack sends BACK unless the outbox holds this offload's back, and
// reads until the back entry comes, BackTimeout in all. A pasted BACK
// that draws no hook for ResendAfter while the session says working (its
// hook time, on the box's clock, is where it was before BACK) is sent
// once more with --interrupt; a queued one never is. The read of the
// outbox, status, BACK and the first wait go in one Exec (BackStart),
// and with ask the box's history after them: bundled is that Exec's
// answer when its bundle came with the back entry, so that it is the
// box's history as its back left it, else nil.
func (b *Backer) waitBack(ctx context.Context, a backAgent, rec *Record, res *BackResult, ask *BundleAsk) (entry *agentwire.Entry, bundled *BackStart, err error) {
	start := b.now()
	deadline := start.Add(BackTimeout)
	// A failure once ctx has ended is the stop, whatever the box half says.
	fail := func(err error) error {
		if ctx.Err() != nil {
			return &Error{Code: ExitFailed, Err: ErrWaitStopped, Next: []Step{waitStoppedNext}}
		}
		if e := stoppedError(err); e != nil {
			return e
		}
		return boxFailure(err)
	}
	since := int64(0)
	find := func(rd *agentwire.ReadResult) *agentwire.Entry {
		var found *agentwire.Entry
		for i, e := range rd.Entries {
			since = max(since, int64(e.Seq))
			if e.Kind == "back" && e.OffloadID == rec.ID {
				found = &rd.Entries[i]
			}
		}
		return found
	}
	if b.Notice != nil {
		b.Notice(fmt.Sprintf("waiting up to %d s for the box agent's hand-over (Ctrl-C stops waiting; nothing changes here)", int(BackTimeout/time.Second)))
	}
	b.logf("send BACK")
	bs, err := a.BackStart(ctx, rec.Repo, rec.ID, remotePath(rec.Dir, rec.Name), ResendAfter, ask)
	if err != nil {
		return nil, nil, fail(err)
	}
	if e := find(bs.Outbox); e != nil {
		return e, withBundle(bs), nil
	}
	// The box's hook times are on the box's clock: they are compared only
	// with each other.
	hookBefore := int64(0)
	sent, sentAt, rd := bs.Message, start, bs.Read
	if !bs.Sent {
		// The copy holds S', but the outbox no back: its post failed, or
		// is on its way. BACK as the contract says.
		ss, err := a.Status(ctx, rec.Repo)
		if err != nil {
			return nil, nil, fail(err)
		}
		bs.Sessions = ss
		if sent, err = a.SendBack(ctx, rec.Repo, false); err != nil {
			return nil, nil, fail(err)
		}
		sentAt, rd = b.now(), nil
	}
	if s := sessionOf(bs.Sessions, rec); s != nil {
		hookBefore = s.HookAtMS
	}
	if n := faultNotice(bs.Outbox.Fault); n != "" && b.Notice != nil {
		b.Notice(n)
	}
	// A CLI held at a dialog, a sign-in or the network takes no BACK: the
	// box skipped the first wait for it (BackStart), and back ends here.
	if f := bs.Outbox.Fault; f.Waits() || retriedOut(f) {
		return nil, nil, b.backFault(rec, bs.Outbox, sent.Seq)
	}
	// The last fault read and when: a retrying one ends the next read
	// when it reaches RetryBound.
	fault, faultAt := bs.Outbox.Fault, b.now()
	status := bs.Outbox.Status
	checked := false // the one resend check is done
	// The bundle came after the first wait, and only with it.
	if rd != nil {
		bundled = withBundle(bs)
	}
	for {
		if rd != nil {
			status = rd.Status
			if e := find(rd); e != nil {
				return e, bundled, nil
			}
			bundled = nil
			fault, faultAt = rd.Fault, b.now()
			// No CLI is left to answer BACK, or none that will.
			if e := b.backFault(rec, rd, sent.Seq); e != nil {
				return nil, nil, e
			}
		}
		now := b.now()
		if !now.Before(deadline) {
			return nil, nil, &Error{Code: ExitFailed,
				Err:  fmt.Errorf("the box agent posted no back in %d s (session: %s)", int(BackTimeout/time.Second), orNone(status)),
				Next: []Step{{"BACK stays queued for the box CLI's next idle; watch with `", Command{Verb: VerbInbox, Wait: 60}, "`, then run ", cmdBack, " again"}}}
		}
		wait := deadline.Sub(now)
		if sent.Delivery == "pasted" && !checked {
			if due := sentAt.Add(ResendAfter); now.Before(due) {
				wait = min(wait, due.Sub(now))
			} else {
				ss, err := a.Status(ctx, rec.Repo)
				if err != nil {
					return nil, nil, fail(err)
				}
				if s := sessionOf(ss, rec); s != nil && s.Status == "working" && s.HookAtMS <= hookBefore {
					b.logf("BACK drew no hook in %d s; sending it again with --interrupt", int(ResendAfter/time.Second))
					if sent, err = a.SendBack(ctx, rec.Repo, true); err != nil {
						return nil, nil, fail(err)
					}
					res.Resent = true
				}
				checked = true
			}
		}
		if fault != nil && fault.Kind == agentwire.FaultRetrying {
			wait = min(wait, RetryBound-time.Duration(fault.AgeMS)*time.Millisecond-now.Sub(faultAt))
		}
		wait = max(wait, time.Second)
		if rd, err = a.Read(ctx, rec.Repo, since, wait); err != nil {
			return nil, nil, fail(err)
		}
	}
}

// withBundle is bs when its bundle came, else nil.
func withBundle(bs *BackStart) *BackStart {
	if bs.Bundle {
		return bs
	}
	return nil
}

func sessionOf(ss []agentwire.Session, rec *Record) *agentwire.Session {
	for i, s := range ss {
		if s.Repo == rec.Repo && (s.OffloadID == "" || s.OffloadID == rec.ID) {
			return &ss[i]
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func boxFailure(err error) error {
	return &Error{Code: ExitFailed, Err: err, Next: []Step{backAgain}}
}

// gitAtLeast refuses a git older than major.minor.
func gitAtLeast(ctx context.Context, g git, major, minor int) error {
	out, err := g.line(ctx, "version")
	if err != nil {
		return err
	}
	f := strings.Fields(out)
	if len(f) >= 3 {
		v := strings.Split(f[2], ".")
		if len(v) >= 2 {
			ma, err1 := strconv.Atoi(v[0])
			mi, err2 := strconv.Atoi(v[1])
			if err1 == nil && err2 == nil && (ma > major || ma == major && mi >= minor) {
				return nil
			}
		}
	}
	return fmt.Errorf("%s is older than git %d.%d", out, major, minor)
}
