package offload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// RefAbandoned names, per offload id, the box copy's work tree as
// abandon found it: a commit whose parent is the copy's HEAD and whose
// tree is git add -A of its work tree, uncommitted and untracked files
// included, ignored files not.
const RefAbandoned = "refs/cocoonbox/abandoned/"

// Abandoner ends an offload that back cannot finish, such as one whose
// box CLI session stopped, without touching the work tree here: the box
// session ends, and the box copy's work comes home as refs only, so
// nothing of it is lost. It also ends an offload the box holds but this
// laptop has no record of. Set the Laptop as it says; Box is needed only
// when this laptop has no record.
type Abandoner struct {
	Laptop
	// Box is the box to look in when this laptop has no record.
	Box string
	// Yes ends a box session that is still running.
	Yes bool
}

// AbandonResult is a finished abandon.
type AbandonResult struct {
	// ID is the offload's id and BoxName its box.
	ID, BoxName string
	// Kept are the refs that hold the box copy's work here: RefAbandoned
	// and the copy's branches under RefBox. None when the copy was gone.
	Kept []string
	// Base is S, which the box started from, when this laptop made it.
	Base string
	// Gone says why nothing could be kept: the box or its copy is gone,
	// or no box CLI session ever started on it.
	Gone string
	// Aside is where the box copy went, in the box, when its work could
	// not be kept here (--yes): the copy's path with .abandoned-<id>.
	Aside string
	// Nothing says there was no offload left to abandon once the one
	// that was interrupted was finished or undone (Notice said which).
	Nothing bool
}

// Run abandons the offload: the repo's lock; the offload (the record, else
// the box's copy of this repo key); the box session's end; the copy's work
// tree as a commit in the copy, fetched with its branches; the record's
// removal. A failure before the fetch changes nothing here, and the
// record stays. An abandon that was interrupted runs again; another
// command that was is finished or undone first (Notice says which).
func (a *Abandoner) Run(ctx context.Context) (*AbandonResult, error) {
	res, err := a.run(ctx)
	return res, stoppedBefore(ctx, err, "its checks")
}

func (a *Abandoner) run(ctx context.Context) (*AbandonResult, error) {
	r := a.Repo
	unlock, err := a.Store.lockRepo(r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := a.Store.LoadRecord(r.Key)
	if errors.Is(err, ErrBadRecord) {
		// Whatever the record holds, abandon ends: as with none here, from
		// what the box holds of this repo key.
		to, merr := a.Store.MoveRecordAside(r.Key)
		if merr != nil {
			return nil, fmt.Errorf("%w; moving it aside: %w", err, merr)
		}
		a.notice(fmt.Sprintf("%v; moved aside to %s", err, to))
		rec, err = nil, nil
	}
	if err != nil && !errors.Is(err, ErrNoRecord) {
		return nil, err
	}
	switch {
	case rec == nil || rec.Op == "":
	case rec.Op == OpAbandon:
		// It got to a step only with the go-ahead a running session needs.
		a.notice(fmt.Sprintf("abandon of offload %s was interrupted during %s; it runs again, as asked", rec.ID, rec.Step))
		yes := *a
		yes.Yes = true
		return yes.abandon(ctx, rec)
	default:
		rz, err := a.resumer().load(ctx, a.Notice)
		if err != nil {
			return nil, err
		}
		if rz.Rec == nil {
			return &AbandonResult{ID: rec.ID, BoxName: rec.BoxName, Nothing: true}, nil
		}
		rec = rz.Rec
	}
	return a.abandon(ctx, rec)
}

// abandon is Run past the lock, for rec (nil: none here).
func (a *Abandoner) abandon(ctx context.Context, rec *Record) (*AbandonResult, error) {
	r := a.Repo
	boxName := a.Box
	if rec != nil {
		boxName = rec.BoxName
	}
	res := &AbandonResult{BoxName: boxName}
	bs, err := a.Client.List(ctx)
	if err != nil {
		return nil, err
	}
	if !hasBox(bs, boxName) {
		if rec == nil {
			return nil, refused(fmt.Errorf("no box named %s", boxName), Step{"see your boxes with: ", Command{Verb: VerbBoxes}})
		}
		res.ID, res.Gone = rec.ID, "box "+boxName+" no longer exists"
		return res, a.Store.removeRecordOf(r.Key, rec.ID)
	}
	agent := &Agent{Exec: a.Client, Box: boxName}
	ss, err := agent.Status(ctx, r.Key)
	if err != nil {
		return nil, &Error{Code: ExitFailed, Err: err, Next: []Step{{"nothing changed; run ", cmdAbandon, " again when the box answers"}}}
	}
	var s *agentwire.Session
	for i := range ss {
		if ss[i].Repo == r.Key {
			s = &ss[i]
		}
	}
	if rec == nil {
		if s == nil || s.Copy == "absent" || (s.OffloadID == "" && s.Copy == "mirror") {
			return nil, &Error{Code: ExitRefused, Err: fmt.Errorf("%s; box %s holds no offload of it either", ErrNoRecord, boxName)}
		}
	}
	running := s != nil && s.Copy == "busy"
	if running && !a.Yes {
		return nil, &Error{Code: ExitConfirm, Err: fmt.Errorf("the box CLI session of this offload is still running (%s)", s.Status),
			Next: []Step{{"bring its work home with: ", cmdBack}, {"or end it anyway, keeping its work in refs: ", Command{Verb: VerbAbandon, Yes: true}}}}
	}
	if rec == nil {
		// The box holds an offload this laptop lost the record of: the
		// journal records it, so that a failure below can be retried.
		id := s.OffloadID
		if id == "" {
			id = NewID()
		}
		rec = &Record{ID: id, Repo: r.Key, BoxName: boxName, Name: s.Name, Kind: s.CLI, Top: r.Top}
	}
	res.ID, res.Base = rec.ID, rec.Base
	name := remotePath(rec.Dir, rec.Name)
	hasCopy := s != nil && s.Copy != "absent"
	// A copy taken for this offload that no session started on holds
	// nothing of the box's: this laptop has all of it.
	unused := s != nil && s.Copy == "mirror" && s.OffloadID == rec.ID
	fail := func(err error) error {
		return &Error{Code: ExitFailed, Err: err,
			Next: []Step{{fmt.Sprintf("the record stays, and so does the copy %s in box %s (look at it with: ", name, boxName), Command{Verb: VerbRsh, Box: boxName}, "); run ", cmdAbandon, " again"}}}
	}
	keep := func() error {
		if err := a.journal(ctx, rec, StepKeep); err != nil {
			return err
		}
		err := a.keep(ctx, agent, name, res)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if !a.Yes {
			return &Error{Code: ExitFailed, Err: err, Next: []Step{
				{fmt.Sprintf("the record stays, and so does the copy %s in box %s (look at it with: ", name, boxName), Command{Verb: VerbRsh, Box: boxName}, ")"},
				{"end it all the same, moving the copy aside in the box: ", Command{Verb: VerbAbandon, Yes: true}}}}
		}
		// The copy's work cannot come here: it stays in the box, aside,
		// and the copy's place is free for the next offload.
		aside := name + ".abandoned-" + rec.ID
		if merr := moveAside(ctx, agent, name, aside); merr != nil {
			return fmt.Errorf("%w; moving the copy aside failed too: %v", err, merr)
		}
		a.logf("could not keep the box copy's work here (%v); it stays in box %s at %s", err, boxName, aside)
		res.Aside = aside
		return nil
	}

	// A stopped session's copy is kept before end, so a failure leaves
	// the box as it was; a running one's after, once nothing writes.
	if hasCopy && !unused && !running {
		if err := keep(); err != nil {
			return nil, a.failed(ctx, rec, err, fail)
		}
	}
	if err := a.journal(ctx, rec, StepEnd); err != nil {
		return nil, err
	}
	a.logf("end the box session")
	var ae *AgentError
	if err := agent.End(ctx, r.Key); err != nil && !(errors.As(err, &ae) && ae.Refused()) {
		return nil, a.failed(ctx, rec, err, fail)
	}
	if hasCopy && !unused && running {
		if err := keep(); err != nil {
			return nil, a.failed(ctx, rec, err, fail)
		}
	}
	switch {
	case !hasCopy:
		res.Gone = "the box copy is gone"
	case unused:
		res.Gone = "no box CLI session started on its copy"
	}
	return res, a.Store.removeRecordOf(r.Key, rec.ID)
}

// failed is abandon's failure in rec's step, which the journal no longer
// names (it did not die): a signal's names the step, an *Error stays as
// it is, and any other is wrapped by fail.
func (a *Abandoner) failed(ctx context.Context, rec *Record, err error, fail func(error) error) error {
	if rec.Op == OpAbandon {
		step := rec.Step
		a.Store.settle(rec)
		rec.Step = step
	}
	if ctx.Err() != nil {
		return interrupted(rec.Step, "nothing changed here; the record stays, and abandon again finishes it")
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	return fail(err)
}

// journal writes rec as the journal of the abandon's step before it runs.
func (a *Abandoner) journal(ctx context.Context, rec *Record, step string) error {
	return a.Store.journal(ctx, rec, OpAbandon, step, a.AtStep)
}

func hasBox(bs []box.Box, name string) bool {
	for _, b := range bs {
		if b.Name == name || b.ID == name {
			return true
		}
	}
	return false
}

// moveAside renames the copy at path (relative to the box's workspace) to
// aside, in the box.
func moveAside(ctx context.Context, agent *Agent, path, aside string) error {
	var errb bytes.Buffer
	st, err := agent.Exec.Exec(ctx, &box.Command{Box: agent.Box, Line: "mv -- " + shellquote.Word(path) + " " + shellquote.Word(aside), Stderr: &errb})
	if err != nil {
		return err
	}
	if st.Error != "" || st.Signal != "" || st.Code != 0 {
		msg, _, _ := strings.Cut(strings.TrimSpace(errb.String()), "\n")
		return fmt.Errorf("mv: %s %s", st.Text(), msg)
	}
	return nil
}

// keep commits the copy's work tree in the copy as RefAbandoned+id, with
// a fresh temporary index so that every file is read, and fetches it and
// the copy's branches here. Whatever state the copy is in it tries: with
// no .git it makes one; when HEAD names no commit it has whole (an offload
// that died in send leaves refs naming objects that never came), the
// commit has no parent, and only it is fetched.
func (a *Abandoner) keep(ctx context.Context, agent *Agent, name string, res *AbandonResult) error {
	ref := RefAbandoned + res.ID
	a.logf("commit the box copy's work tree as %s", ref)
	script := `set -e
cd -- ` + shellquote.Word(name) + `
export GIT_CEILING_DIRECTORIES="$(dirname "$PWD")"
git rev-parse --git-dir >/dev/null 2>&1 || git init -q
g=$(git rev-parse --absolute-git-dir)
i="$g/cocoonbox-abandon-index"
trap 'rm -f "$i" "$i.lock"' EXIT
rm -f "$i" "$i.lock" "$g/` + ref + `.lock"
export GIT_INDEX_FILE="$i"
p=
if git read-tree HEAD 2>/dev/null; then p=HEAD; else rm -f "$i"; git read-tree --empty; echo orphan; fi
git add -A -- .
t=$(git write-tree)
c=$(GIT_AUTHOR_NAME=cocoonbox GIT_AUTHOR_EMAIL=cocoonbox@localhost GIT_COMMITTER_NAME=cocoonbox GIT_COMMITTER_EMAIL=cocoonbox@localhost git commit-tree "$t" ${p:+-p "$p"} -m ` + shellquote.Word("cocoonbox abandon "+res.ID+": the box copy's work tree") + `)
git update-ref ` + ref + ` "$c"
`
	var out, errb bytes.Buffer
	st, err := agent.Exec.Exec(ctx, &box.Command{Box: agent.Box, Line: script, Stdout: &out, Stderr: &errb})
	if err != nil {
		return err
	}
	if st.Error != "" || st.Signal != "" || st.Code != 0 {
		ge := &gitcmd.Error{Args: []string{"add -A in the box copy"}, Stderr: errb.String(), Err: errors.New(st.Text())}
		return fmt.Errorf("keeping the box copy's work tree: %w", ge)
	}
	orphan := strings.Contains(out.String(), "orphan")
	a.logf("fetch from %s:%s", agent.Box, name)
	r := a.Repo
	specs := []string{"+refs/heads/*:" + RefBox + "*", "+" + ref + ":" + ref}
	if orphan {
		specs = specs[1:]
	}
	if err := r.fetchBox(ctx, a.Environ, a.Shim, agent.Box+":"+name, specs); err != nil {
		return err
	}
	if _, err := r.git.line(ctx, "rev-parse", "--verify", "-q", ref+"^{commit}"); err != nil {
		return fmt.Errorf("the fetch brought no %s", ref)
	}
	res.Kept = []string{ref}
	if !orphan {
		res.Kept = append(res.Kept, RefBox+"*")
	}
	return nil
}
