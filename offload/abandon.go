package offload

import (
	"bytes"
	"context"
	"errors"
	"fmt"

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
// laptop has no record of. Set every field but Logf.
type Abandoner struct {
	Repo  *Repo
	Store Store
	// Client is the box service.
	Client Client
	// Box is the box to look in when this laptop has no record.
	Box string
	// Yes ends a box session that is still running.
	Yes bool
	// Environ is the laptop's environment; git fetch over the shim
	// inherits it.
	Environ []string
	// Shim is the ssh-like program for GIT_SSH_COMMAND, quoted as one word.
	Shim string
	Logf func(format string, args ...any)
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
	// Gone says why nothing could be kept: the box or its copy is gone.
	Gone string
}

func (a *Abandoner) logf(format string, args ...any) {
	if a.Logf != nil {
		a.Logf(format, args...)
	}
}

// Run abandons the offload: the repo's lock; the offload (the record, else
// the box's copy of this repo key); the box session's end; the copy's work
// tree as a commit in the copy, fetched with its branches; the record's
// removal. A failure before the fetch changes nothing here, and the
// record stays.
func (a *Abandoner) Run(ctx context.Context) (*AbandonResult, error) {
	r := a.Repo
	unlock, err := a.Store.Lock(r.Key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := a.Store.LoadRecord(r.Key)
	if err != nil && !errors.Is(err, ErrNoRecord) {
		return nil, err
	}
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
		// The box holds an offload this laptop lost the record of: record
		// it, so that a failure below can be retried.
		id := s.OffloadID
		if id == "" {
			id = NewID()
		}
		rec = &Record{ID: id, Repo: r.Key, BoxName: boxName, Name: s.Name, Kind: s.CLI, Top: r.Top}
		if err := a.Store.SaveRecord(rec); err != nil {
			return nil, err
		}
	}
	res.ID, res.Base = rec.ID, rec.Base
	name := remotePath(rec.Dir, rec.Name)
	hasCopy := s != nil && s.Copy != "absent"
	failed := func(err error) error {
		return &Error{Code: ExitFailed, Err: err,
			Next: []Step{{fmt.Sprintf("the record stays, and so does the copy %s in box %s (look at it with: ", name, boxName), Command{Verb: VerbRsh, Box: boxName}, "); run ", cmdAbandon, " again"}}}
	}

	// A stopped session's copy is kept before end, so a failure leaves
	// the box as it was; a running one's after, once nothing writes.
	if hasCopy && !running {
		if err := a.keep(ctx, agent, name, res); err != nil {
			return nil, failed(err)
		}
	}
	a.logf("end the box session")
	var ae *AgentError
	if err := agent.End(ctx, r.Key); err != nil && !(errors.As(err, &ae) && ae.Refused()) {
		return nil, failed(err)
	}
	if hasCopy && running {
		if err := a.keep(ctx, agent, name, res); err != nil {
			return nil, failed(err)
		}
	}
	if !hasCopy {
		res.Gone = "the box copy is gone"
	}
	return res, a.Store.removeRecordOf(r.Key, rec.ID)
}

func hasBox(bs []box.Box, name string) bool {
	for _, b := range bs {
		if b.Name == name || b.ID == name {
			return true
		}
	}
	return false
}

// keep commits the copy's work tree in the copy as RefAbandoned+id, with
// a fresh temporary index so that every file is read, and fetches it and
// the copy's branches here.
func (a *Abandoner) keep(ctx context.Context, agent *Agent, name string, res *AbandonResult) error {
	ref := RefAbandoned + res.ID
	a.logf("commit the box copy's work tree as %s", ref)
	script := `set -e
cd -- ` + shellquote.Word(name) + `
i="$(git rev-parse --git-dir)/cocoonbox-abandon-index"
trap 'rm -f "$i" "$i.lock"' EXIT
rm -f "$i"
export GIT_INDEX_FILE="$i"
git read-tree HEAD
git add -A -- .
t=$(git write-tree)
c=$(GIT_AUTHOR_NAME=cocoonbox GIT_AUTHOR_EMAIL=cocoonbox@localhost GIT_COMMITTER_NAME=cocoonbox GIT_COMMITTER_EMAIL=cocoonbox@localhost git commit-tree "$t" -p HEAD -m ` + shellquote.Word("cocoonbox abandon "+res.ID+": the box copy's work tree") + `)
git update-ref ` + ref + ` "$c"
`
	var errb bytes.Buffer
	st, err := agent.Exec.Exec(ctx, &box.Command{Box: agent.Box, Line: script, Stderr: &errb})
	if err != nil {
		return err
	}
	if st.Error != "" || st.Signal != "" || st.Code != 0 {
		ge := &gitcmd.Error{Args: []string{"add -A in the box copy"}, Stderr: errb.String(), Err: fmt.Errorf("exit status %d%s", st.Code, st.Error)}
		return fmt.Errorf("keeping the box copy's work tree: %w", ge)
	}
	a.logf("fetch from %s:%s", agent.Box, name)
	r := a.Repo
	fetch := git{dir: r.Top, env: append(HostEnv(a.Environ, true), "GIT_SSH_COMMAND="+a.Shim, "GIT_SSH_VARIANT=simple")}
	if _, err := fetch.run(ctx, nil, "fetch", "-q", "--no-tags", "--no-write-fetch-head", agent.Box+":"+name,
		"+refs/heads/*:"+RefBox+"*", "+"+ref+":"+ref); err != nil {
		return err
	}
	if _, err := r.git.line(ctx, "rev-parse", "--verify", "-q", ref+"^{commit}"); err != nil {
		return fmt.Errorf("the fetch brought no %s", ref)
	}
	res.Kept = []string{ref, RefBox + "*"}
	return nil
}
