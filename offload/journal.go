package offload

// The journal: offload.json names, before each step of an offload, a back
// or an abandon runs, the command and the step (Record.Op, Record.Step).
// Every command that writes it holds the repository's lock, so a record
// with Op set that the next command finds under that lock was left by one
// that died (kill -9, a power loss); the next offload, back, abandon or
// restart then finishes or undoes that step (resumer) and says which in
// one line, before it does its own work. docs/offload.md "The journal"
// has the table of steps and what follows a kill in each.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/flock"
)

// The commands a journal names (Record.Op).
const (
	OpOffload = "offload"
	OpBack    = "back"
	OpAbandon = "abandon"
)

// The steps of each command, in the order it runs them (Record.Step).
const (
	// StepBegin is offload's begin in the box: the copy is taken.
	StepBegin = "begin"
	// StepSnapshot makes S and the index commit here.
	StepSnapshot = "snapshot"
	// StepRsync syncs the work tree (and .git without objects) to the copy.
	StepRsync = "rsync"
	// StepSend writes the bundle and sends the stream; the box starts the
	// box CLI session.
	StepSend = "send"
	// StepWait sends BACK and waits for the box agent's hand-over.
	StepWait = "wait"
	// StepFetch fetches the box's commits and S' here.
	StepFetch = "fetch"
	// StepMerge takes the index lock and plans the merge; end runs beside.
	StepMerge = "merge"
	// StepApply changes the work tree, HEAD and the index (Record.Merge
	// says to what).
	StepApply = "apply"
	// StepEnd ends the box session (back: after the merge is done).
	StepEnd = "end"
	// StepKeep is abandon's commit and fetch of the box copy's work.
	StepKeep = "keep"
)

// MergeJournal is back's merge as the journal keeps it: from the apply
// step on what the work tree update changes, from the end step on its
// outcome.
type MergeJournal struct {
	// Head is HEAD before back; MoveTo the commit back moves it to, ""
	// when it stays.
	Head   string `json:"head"`
	MoveTo string `json:"move_to,omitempty"`
	// Work is RefPreBackWork's commit: the work tree before back.
	Work string `json:"work"`
	// Target is the tree the work tree moves to.
	Target string `json:"target"`
	// EndMerge says a merge in progress here ends as HEAD moves.
	EndMerge bool `json:"end_merge,omitempty"`
	// Outcome is the merge's (MergeResult): planned from the apply step
	// on, done from the end step on, with Branch and Reason.
	Outcome string `json:"outcome,omitempty"`
	Branch  string `json:"branch,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// StepFunc is called once the journal names a step, before the step
// runs, with the command and the step: where cocoonbox's test hook
// COCOONBOX_TEST_KILL_AT=op:step stops the process (docs/cli.md).
type StepFunc func(op, step string)

// ErrInterrupted is in the error of an offload, back or abandon that a
// signal (Ctrl-C, SIGTERM) stopped: "interrupted during STEP; …".
var ErrInterrupted = errors.New("interrupted")

// interrupted is the failure of a command a signal stopped in step, with
// what says what was left where.
func interrupted(step, what string, next ...Step) *Error {
	return &Error{Code: ExitFailed, Err: fmt.Errorf("%w during %s; %s", ErrInterrupted, step, what), Next: next}
}

// stoppedBefore is err, when a signal ended ctx, as the failure of a
// command stopped before its steps (in step, which names where): nothing
// changed. An *Error, which says what it left, stays as it is.
func stoppedBefore(ctx context.Context, err error, step string) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	return interrupted(step, "nothing changed here")
}

// interruptedNext is the way on from a record whose journal names the
// step a command died in: the next back or abandon finishes or undoes it.
var interruptedNext = Step{"finish or undo it first: ", cmdBack, " or ", cmdAbandon, " does, and says which"}

// interruptedLine says which step of which command rec's journal names:
// "offload ID was interrupted during STEP".
func interruptedLine(rec *Record) string {
	return fmt.Sprintf("%s %s was interrupted during %s", opName(rec), rec.ID, rec.Step)
}

// Interrupted is, for a repository whose record names a step of a
// command that died there (kill -9, a power loss), the line that says so
// and the way on, for inbox, send and status to say in place of what the
// box alone tells them; "" and nil when its record names no step, or the
// command that names it still runs (it holds the repository's lock).
func (s Store) Interrupted(key string) (string, []Step) {
	unlock, err := flock.Hold(s.LockPath(key), flock.Exclusive|flock.NoWait)
	if err != nil {
		return "", nil
	}
	defer unlock()
	rec, err := s.LoadRecord(key)
	if err != nil || rec.Op == "" {
		return "", nil
	}
	return interruptedLine(rec), []Step{interruptedNext}
}

// journal writes rec as the journal of op's step, durably, before the
// step runs, then calls at when it is not nil. ctx ends a wait for
// record.lock, which another cocoonbox may hold (a stopped inbox):
// then the journal names the step before, and the error wraps ctx's.
func (s Store) journal(ctx context.Context, rec *Record, op, step string, at StepFunc) error {
	rec.Op, rec.Step = op, step
	if err := s.saveRecord(ctx, rec); err != nil {
		return err
	}
	if at != nil {
		at(op, step)
	}
	return nil
}

// settle writes rec with no command running on it: the offload is in
// flight.
func (s Store) settle(rec *Record) error {
	rec.Op, rec.Step = "", ""
	return s.SaveRecord(rec)
}

// resumer finishes or undoes what a killed offload, back or abandon left
// (the record's Op and Step). The command that finds it runs it under the
// repository's lock, before its own work.
type resumer struct {
	// Laptop is the command's; when its Client is nil, a box that is gone
	// cannot be told from one that does not answer.
	Laptop
}

// resumed is what resume did.
type resumed struct {
	// Line says in one line which step of which command was interrupted,
	// and whether it was finished or undone; "" when none was.
	Line string
	// Rec is the record after: nil when no offload is in flight now.
	Rec *Record
	// Was is the record as it was found.
	Was *Record
	// Back is the merge of a back that this resume finished.
	Back *MergeJournal
	// Abandon is the result of an abandon that this resume finished.
	Abandon *AbandonResult
}

// load reads the repository's record and resumes what an interrupted
// command left on it, telling notice (when set) the line that says what
// became of it. A bundle left by a send or a back that died goes in any
// case: only a send or a back, under the repository's lock, has one.
func (rs *resumer) load(ctx context.Context, notice func(string)) (*resumed, error) {
	os.Remove(filepath.Join(rs.Store.RepoDir(rs.Repo.Key), "offload.bundle"))
	os.Remove(filepath.Join(rs.Store.RepoDir(rs.Repo.Key), backBundle))
	rec, err := rs.Store.LoadRecord(rs.Repo.Key)
	if errors.Is(err, ErrNoRecord) {
		return &resumed{}, nil
	}
	if err != nil {
		return nil, err
	}
	rz, err := rs.resume(ctx, rec)
	if err != nil {
		return nil, err
	}
	rz.Was = rec
	if rz.Line != "" && notice != nil {
		notice(rz.Line)
	}
	return rz, nil
}

// resume finishes or undoes rec's interrupted step, if any. Its errors
// are *Error, saying what was left where; the record then stays.
func (rs *resumer) resume(ctx context.Context, rec *Record) (*resumed, error) {
	switch rec.Op {
	case "":
		return &resumed{Rec: rec}, nil
	case OpOffload:
		return rs.offload(ctx, rec)
	case OpBack:
		return rs.back(ctx, rec)
	case OpAbandon:
		return rs.abandon(ctx, rec)
	}
	return nil, refused(fmt.Errorf("%s names a command %q that this cocoonbox does not know", rs.Store.recordPath(rec.Repo), rec.Op),
		Step{"run the cocoonbox that wrote it, or a newer one"})
}

// opName names the command rec's journal names, for a message: "offload"
// or "back of offload".
func opName(rec *Record) string {
	if rec.Op == OpOffload {
		return "offload"
	}
	return rec.Op + " of offload"
}

func (rs *resumer) agent(rec *Record) *Agent {
	return &Agent{Exec: rs.Client, Box: rec.BoxName, Progress: rs.Progress}
}

// boxGone reports whether the box service says it has no box named name.
func (rs *resumer) boxGone(ctx context.Context, name string) bool {
	return boxGone(ctx, rs.Client, name)
}

// boxGone reports whether x, when it lists boxes (a Client), has no box
// named name.
func boxGone(ctx context.Context, x Execer, name string) bool {
	c, ok := x.(Client)
	if !ok {
		return false
	}
	bs, err := c.List(ctx)
	return err == nil && !hasBox(bs, name)
}

// GoneError is, for a command on rec's offload that failed with err, the
// failure to say in its place when rec's box no longer exists (x lists
// no box of its name): the box's work went with it, and abandon drops
// the record. It is err otherwise, or when ctx has ended.
func GoneError(ctx context.Context, x Execer, rec *Record, err error) error {
	if err == nil || ctx.Err() != nil || !boxGone(ctx, x, rec.BoxName) {
		return err
	}
	return &Error{Code: ExitFailed, Err: fmt.Errorf("box %s no longer exists, and the work of offload %s went with it", rec.BoxName, rec.ID),
		Next: []Step{{"drop this offload's record: ", cmdAbandon}}}
}

// offload undoes an offload that died before its box CLI session
// started (the bundle, the refs, the record go; the box gives the copy
// back, and removes it when this offload made it), or finishes one whose
// session started (it is in flight).
func (rs *resumer) offload(ctx context.Context, rec *Record) (*resumed, error) {
	r := rs.Repo
	dir := rs.Store.RepoDir(rec.Repo)
	os.Remove(filepath.Join(dir, "offload.bundle"))
	os.Remove(filepath.Join(dir, "excludes"))
	r.clearStale()
	what := interruptedLine(rec)
	a := rs.agent(rec)
	ss, err := a.Status(ctx, rec.Repo)
	if err != nil {
		if rs.boxGone(ctx, rec.BoxName) {
			r.dropRefs(ctx, rec.ID)
			return &resumed{Line: what + "; nothing changed here; box " + rec.BoxName + " no longer exists"}, rs.Store.removeRecordOf(rec.Repo, rec.ID)
		}
		return nil, &Error{Code: ExitFailed, Err: fmt.Errorf("%s, and box %s does not answer: %w", what, rec.BoxName, err),
			Next: []Step{{"nothing changed here; run the command again when the box answers"}}}
	}
	for _, s := range ss {
		if s.Repo == rec.Repo && s.OffloadID == rec.ID && (s.Copy == "busy" || s.Copy == "unreturned") {
			if err := rs.Store.settle(rec); err != nil {
				return nil, err
			}
			return &resumed{Line: what + ", but its box CLI session had started: it is in flight", Rec: rec}, nil
		}
	}
	gave := giveBack(ctx, a, rec.Repo, rec.ID, rec.Dir, rec.Name, rec.Copy)
	r.dropRefs(ctx, rec.ID)
	if err := rs.Store.removeRecordOf(rec.Repo, rec.ID); err != nil {
		return nil, err
	}
	return &resumed{Line: what + "; nothing changed here; " + gave}, nil
}

// back undoes what a back that died before its merge changed anything
// left (a stale index lock and ref locks of ours), undoes or finishes a
// work tree update it left partway (resumeApply), and finishes one that
// died after its merge (end, then the record goes).
func (rs *resumer) back(ctx context.Context, rec *Record) (*resumed, error) {
	r := rs.Repo
	what := interruptedLine(rec)
	// Whatever the step, its temporary indexes and ref locks are ours.
	r.clearStale()
	switch rec.Step {
	case StepEnd:
	case StepApply:
		if rec.Merge == nil {
			return nil, fmt.Errorf("%s, and %s does not say what it changed", what, rs.Store.recordPath(rec.Repo))
		}
		finished, err := r.resumeApply(ctx, what, rec.ID, rec.Merge)
		if err != nil {
			return nil, err
		}
		if !finished {
			rec.Merge = nil
			if err := rs.Store.settle(rec); err != nil {
				return nil, err
			}
			return &resumed{Line: what + "; undone: your files, index and HEAD are as they were before it", Rec: rec}, nil
		}
		if err := rs.Store.journal(ctx, rec, OpBack, StepEnd, nil); err != nil {
			return nil, err
		}
	default:
		staleLock(filepath.Join(r.GitDir, "index.lock"))
		rec.Merge = nil
		if err := rs.Store.settle(rec); err != nil {
			return nil, err
		}
		return &resumed{Line: what + "; nothing changed here", Rec: rec}, nil
	}
	outcome := ""
	if rec.Merge != nil {
		outcome = " (" + rec.Merge.Outcome + ")"
	}
	var ae *AgentError
	if err := rs.agent(rec).End(ctx, rec.Repo); err != nil && !(errors.As(err, &ae) && ae.Refused()) {
		return nil, &Error{Code: ExitFailed, Err: fmt.Errorf("%s; the box's work is here%s, but ending the box session failed: %w", what, outcome, err),
			Next: []Step{{"run ", cmdBack, " again to end it"}}}
	}
	if err := rs.Store.removeRecordOf(rec.Repo, rec.ID); err != nil {
		return nil, err
	}
	return &resumed{Line: what + "; finished: the box's work was here already" + outcome + ", and the box session has ended", Back: rec.Merge}, nil
}

// abandon finishes an abandon: it runs again, as asked, --yes included.
func (rs *resumer) abandon(ctx context.Context, rec *Record) (*resumed, error) {
	what := interruptedLine(rec)
	if rs.Client == nil {
		return nil, &Error{Code: ExitFailed, Err: errors.New(what), Next: []Step{{"finish it with: ", cmdAbandon}}}
	}
	a := &Abandoner{Laptop: rs.Laptop, Box: rec.BoxName, Yes: true}
	res, err := a.abandon(ctx, rec)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Err = fmt.Errorf("%s; finishing it failed: %w", what, e.Err)
			return nil, e
		}
		return nil, fmt.Errorf("%s; finishing it failed: %w", what, err)
	}
	line := what + "; finished: the box session has ended"
	if len(res.Kept) > 0 {
		line += ", and the box's work is in " + RefAbandoned + res.ID
	}
	return &resumed{Line: line, Abandon: res}, nil
}

// resumeApply finishes or undoes the work tree update of a back that died
// in it (j says what it changed; what names the interruption). When HEAD
// is at j.MoveTo and the index lock is gone, the new index was written:
// the rest (ending a merge in progress) is done, and it reports finished.
// Otherwise it undoes: HEAD goes back to j.Head, our stale index lock
// goes, and each file the update changes that is as the box has it goes
// back to how back found it. A file as neither (changed since, or cut
// short by a power loss) stops it with HEAD and the index as before it
// (our lock gone) and the files as they are: an *Error naming the files
// and the git restore that puts them back.
func (r *Repo) resumeApply(ctx context.Context, what, id string, j *MergeJournal) (bool, error) {
	lockPath := filepath.Join(r.GitDir, "index.lock")
	_, lerr := os.Lstat(lockPath)
	held := lerr == nil
	head, err := r.git.head(ctx)
	if err != nil {
		return false, err
	}
	if j.MoveTo != "" && head == j.MoveTo && !held {
		if j.EndMerge && r.inProgress() == "a merge" {
			if _, err := r.git.run(ctx, nil, "merge", "--quit"); err != nil {
				return false, err
			}
		}
		r.git.run(ctx, nil, "update-index", "-q", "--refresh")
		return true, nil
	}
	restore := Step{"to put your files back as they were before it: git restore --source=" + RefPreBackWork + id + " --worktree -- :/; then run ", cmdBack, " again"}
	if head != j.Head && (j.MoveTo == "" || head != j.MoveTo) {
		return false, &Error{Code: ExitFailed, Err: fmt.Errorf("%s, and HEAD moved since (to %s); back leaves it as it is", what, short(head)), Next: []Step{restore}}
	}
	if held && !ownStaleLock(lockPath) {
		return false, &Error{Code: ExitFailed, Err: fmt.Errorf("%s, and another git process holds the index lock now", what),
			Next: []Step{{"when no git is running here, run ", cmdBack, " again"}}}
	}
	u, err := r.planRestore(ctx, j)
	if err != nil {
		return false, err
	}
	// HEAD goes back while the lock is there, so that an undo cut short
	// never reads as HEAD moved with the index written (finished).
	if j.MoveTo != "" && head == j.MoveTo {
		if _, err := r.git.run(ctx, nil, "update-ref", "-m", "cocoonbox back "+id+": undone", "HEAD", j.Head, j.MoveTo); err != nil {
			return false, err
		}
	}
	// Our lock goes even when the files stay as they are: the restore
	// named below could not run past it.
	if held {
		staleLock(lockPath)
	}
	if len(u.conflicts) > 0 {
		return false, &Error{Code: ExitFailed, Err: fmt.Errorf("%s, and %s %s neither as before it nor as the box has them; HEAD and the index are as before it, the files as they are", what, pathList(u.conflicts), isAre(len(u.conflicts))),
			Next: []Step{restore}}
	}
	if err := r.restoreWork(ctx, j, u); err != nil {
		return false, err
	}
	r.git.run(ctx, nil, "update-index", "-q", "--refresh")
	return false, nil
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func short(oid string) string { return oid[:min(len(oid), 12)] }

// restorePlan is what restoreWork does: the files to write from j.Work,
// those to remove, and those that are as neither (then it does nothing).
type restorePlan struct {
	write, remove, conflicts []string
}

// planRestore finds, of the files the update from j.Work's tree to
// j.Target changes, those that are as j.Target has them: a file j.Work has
// is to be written from it, one it has not removed. Those as neither are
// conflicts.
func (r *Repo) planRestore(ctx context.Context, j *MergeJournal) (*restorePlan, error) {
	wt := j.Work + "^{tree}"
	paths, err := r.diffPaths(ctx, wt, j.Target)
	if err != nil || len(paths) == 0 {
		return &restorePlan{}, err
	}
	before, err := r.treeEntries(ctx, wt, paths)
	if err != nil {
		return nil, err
	}
	box, err := r.treeEntries(ctx, j.Target, paths)
	if err != nil {
		return nil, err
	}
	now, err := r.workEntries(ctx, paths)
	if err != nil {
		return nil, err
	}
	u := &restorePlan{}
	for _, p := range paths {
		cur, ok := now[p]
		b, inBefore := before[p]
		x, inBox := box[p]
		switch {
		case ok == inBefore && (!ok || cur == b):
		case ok == inBox && (!ok || cur == x):
			if inBefore {
				u.write = append(u.write, p)
			} else {
				u.remove = append(u.remove, p)
			}
		default:
			u.conflicts = append(u.conflicts, p)
		}
	}
	return u, nil
}

// restoreWork carries out u: the files only the box's tree has go (and
// the directories only they made), the others are written from j.Work.
func (r *Repo) restoreWork(ctx context.Context, j *MergeJournal, u *restorePlan) error {
	for i := len(u.remove) - 1; i >= 0; i-- {
		full := filepath.Join(r.Top, filepath.FromSlash(u.remove[i]))
		if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for d := filepath.Dir(full); d != r.Top && strings.HasPrefix(d, r.Top); d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				break
			}
		}
	}
	if len(u.write) == 0 {
		return nil
	}
	g, _, cleanup, err := r.tempIndex(ctx, j.Work+"^{tree}")
	if err != nil {
		return err
	}
	defer cleanup()
	_, err = g.run(ctx, strings.NewReader(strings.Join(u.write, "\x00")+"\x00"), "checkout-index", "-f", "-z", "--stdin")
	return err
}

// treeEntries maps each of paths in tree-ish t to "mode oid".
func (r *Repo) treeEntries(ctx context.Context, t string, paths []string) (map[string]string, error) {
	out, err := r.git.run(ctx, nil, append([]string{"ls-tree", "-r", "-z", "--full-tree", t, "--"}, paths...)...)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, e := range nulList(out) {
		info, p, ok := strings.Cut(e, "\t")
		if f := strings.Fields(info); ok && len(f) == 3 {
			m[p] = f[0] + " " + f[2]
		}
	}
	return m, nil
}

// workEntries maps each of paths that is a file or symlink in the work
// tree to "mode oid" as git add would hash it; a directory is "dir".
func (r *Repo) workEntries(ctx context.Context, paths []string) (map[string]string, error) {
	m := map[string]string{}
	var files, modes []string
	for _, p := range paths {
		full := filepath.Join(r.Top, filepath.FromSlash(p))
		fi, err := os.Lstat(full)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, err
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(full)
			if err != nil {
				return nil, err
			}
			oid, err := r.git.run(ctx, strings.NewReader(target), "hash-object", "--stdin", "--no-filters")
			if err != nil {
				return nil, err
			}
			m[p] = "120000 " + strings.TrimSpace(oid)
		case fi.IsDir():
			m[p] = "dir"
		default:
			mode := "100644"
			if fi.Mode()&0o111 != 0 {
				mode = "100755"
			}
			files, modes = append(files, p), append(modes, mode)
		}
	}
	if len(files) == 0 {
		return m, nil
	}
	var in strings.Builder
	for _, f := range files {
		in.WriteString(cQuote(f) + "\n")
	}
	out, err := r.git.run(ctx, strings.NewReader(in.String()), "hash-object", "--stdin-paths")
	if err != nil {
		return nil, err
	}
	oids := strings.Fields(out)
	if len(oids) != len(files) {
		return nil, fmt.Errorf("git hash-object gave %d names for %d files", len(oids), len(files))
	}
	for i, p := range files {
		m[p] = modes[i] + " " + oids[i]
	}
	return m, nil
}

// cQuote is p quoted as git quotes a path (a C-style string: \\, \" and
// the other control bytes as octal), which --stdin-paths reads back as p
// whatever it holds: a newline, a carriage return at its end, or a
// leading quote would otherwise be split, trimmed or unquoted.
func cQuote(p string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// clearStale removes what a killed command of ours left in the git
// directory: temporary indexes (cocoonbox-index-*, and their locks), and
// the lock files of refs under refs/cocoonbox/, which only offload, back
// and abandon write, under the repository's lock.
func (r *Repo) clearStale() {
	tmp, _ := filepath.Glob(filepath.Join(r.GitDir, "cocoonbox-index-*"))
	for _, p := range tmp {
		os.Remove(p)
	}
	filepath.WalkDir(filepath.Join(r.CommonDir, "refs", "cocoonbox"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			os.Remove(p)
		}
		return nil
	})
}
