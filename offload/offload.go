// Package offload is the laptop half of offload and back (contract
// seeds/001 "Offload (design §27)"): the preflight, the hand-over, the
// snapshot and bundle, the rsync and git drivers over cocoonbox-ssh, the
// send stream, and back's merge. The box half is reached through Agent.
// Nothing here prints: progress goes to a Logf.
package offload

import (
	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/handover"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"

	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/atomicfile"

	"github.com/cocoonbox/cocoonbox/internal/printable"
)

// Exit statuses of offload and back beyond 0, and 2 for usage
// (DESIGN.md "Offload and back").
const (
	// ExitFailed is a failure, rolled back as the contract states.
	ExitFailed = 1
	// ExitRefused is a refusal: nothing changed.
	ExitRefused = 3
	// ExitConfirm is a warning that needs --yes.
	ExitConfirm = 4
)

// Error is a failure of offload or back with its exit status, the next
// steps for the user, and the findings that caused it.
type Error struct {
	// Code is ExitFailed, ExitRefused or ExitConfirm; cocoonbox back makes
	// an ErrWaitStopped 128+N, N the signal that stopped it.
	Code int
	// Err says what happened in one line.
	Err error
	// Next are the next steps, each one line.
	Next []Step
	// Findings are the preflight findings behind a refusal or a confirm.
	Findings []agentwire.Finding
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func refused(err error, next ...Step) *Error {
	return &Error{Code: ExitRefused, Err: err, Next: next}
}

// Offloader moves one repository's work into a box and starts the box
// CLI there (contract "Offload, Mac side"). Set the Laptop as it says,
// and every field here but Preflight, which may be nil.
type Offloader struct {
	Laptop
	// Box is the box's name or id.
	Box string
	// Kind is the box CLI's kind.
	Kind agentwire.Kind
	// Yes is the user's go-ahead for warnings.
	Yes bool
	// Home is the laptop user's home, for the aws, kube, gcloud and ssh
	// secret entries.
	Home string
	// Preflight holds the laptop checks' probes; nil runs none.
	Preflight *Preflight
	// NoCompress drops rsync's -z: for a box on this machine (a unix
	// socket or loopback endpoint), where compressing costs CPU for
	// nothing.
	NoCompress bool
	// AgentEnv is added to the environment of the box half's verbs: the
	// box half's own test hook (docs/cli.md).
	AgentEnv map[string]string
}

// Client is what offload and back need of the box service.
type Client interface {
	Execer
	List(ctx context.Context) ([]box.Box, error)
}

// Result is a finished offload.
type Result struct {
	Record   *Record
	Begin    *agentwire.BeginResult
	Send     *agentwire.SendResult
	Warnings []agentwire.Finding
	// Timings are the steps' durations, in order.
	Timings []Timing
}

// Timing is one step's duration.
type Timing struct {
	Step string
	D    time.Duration
}

// ReadHandover reads and checks the repo's hand-over: present, not the
// untouched template, valid, no section left as the template's text
// (contract "Hand-over"). It is the first check. A refusal lists every
// problem found, one finding each, and returns what was read with it.
func ReadHandover(st Store, key string) ([]byte, error) {
	p := st.HandoverPath(key)
	b, err := readLimited(p, handover.Max+1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, refused(fmt.Errorf("no hand-over at %s", p),
			Step{"write one there (", Command{Verb: VerbHandoverPath}, " makes the template), or paste the text of `", Command{Verb: VerbHandoverPrompt}, "` into your coding agent"})
	}
	if err != nil {
		return nil, refused(err)
	}
	if bytes.Equal(b, HandoverTemplate()) {
		return b, refused(fmt.Errorf("the hand-over at %s is still the template", p), Step{"fill in each section, then run offload again"})
	}
	var problems, fix []string
	if err := handover.Validate(b); err != nil {
		var he *handover.Error
		if !errors.As(err, &he) {
			return b, refused(err, Step{"fix " + p + ", then run offload again"})
		}
		problems = he.Problems()
	}
	if utf8.Valid(b) && len(b) <= handover.Max {
		if left := templateLeft(b); len(left) > 0 {
			problems = append(problems, "still holds the template's text in "+strings.Join(left, ", "))
			fix = append(fix, "replace the template's text with what the box agent needs to know (an empty section says none)")
		}
	}
	if len(problems) == 0 {
		return b, nil
	}
	if len(problems) > len(fix) {
		fix = append(fix, "fix "+p)
	}
	next := strings.Join(fix, "; ") + "; then run offload again"
	e := refused(fmt.Errorf("the hand-over at %s is not ready", p), Step{next})
	for _, pr := range problems {
		e.Findings = append(e.Findings, agentwire.Finding{Check: "handover", Outcome: agentwire.Block, Detail: pr})
	}
	return b, e
}

// withSecretsNeeded adds to a hand-over's refusal the preflight's warning
// on its "Secrets needed:" line, when it applies, so that one run names
// every problem of the hand-over.
func (o *Offloader) withSecretsNeeded(err error, h []byte) error {
	var e *Error
	if !errors.As(err, &e) || len(e.Findings) == 0 {
		return err
	}
	settings, serr := o.Store.LoadSettings()
	if serr != nil {
		return err
	}
	if f, ok := o.Preflight.secretsNeededFinding(h, settings[o.Repo.Key].Secrets); ok {
		e.Findings = append(e.Findings, f)
	}
	return err
}

func readLimited(p string, max int64) ([]byte, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// Run offloads: hand-over, the repo's lock, laptop preflight, begin,
// snapshot, rsync, the record, send. Laptop blocks refuse before the box
// is asked; box blocks refuse next; then the warnings of both halves need
// the go-ahead. A failure after begin removes the record, the bundle and
// the refs it made, and gives back the copy begin took unless a box CLI
// session started on it.
func (o *Offloader) Run(ctx context.Context) (*Result, error) {
	res, err := o.run(ctx)
	return res, stoppedBefore(ctx, err, "preflight")
}

func (o *Offloader) run(ctx context.Context) (*Result, error) {
	res := &Result{}
	t0 := o.now()
	step := func(name string, since time.Time) time.Time {
		now := o.now()
		res.Timings = append(res.Timings, Timing{name, now.Sub(since)})
		return now
	}
	r := o.Repo
	handover, err := ReadHandover(o.Store, r.Key)
	if err != nil {
		return nil, o.withSecretsNeeded(err, handover)
	}
	unlock, err := o.Store.lockRepo(r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if rz, err := o.resumer().load(ctx, o.Notice); err != nil {
		return nil, err
	} else if rec := rz.Rec; rec != nil {
		return nil, refused(fmt.Errorf("offload %s of this repository is still in box %s", rec.ID, rec.BoxName), stillInBoxNext...)
	}
	agent := &Agent{Exec: o.Client, Box: o.Box, Progress: o.Progress, Env: o.AgentEnv}
	ahead := o.lookAhead(ctx, agent)
	defer ahead.stop()
	settings, err := o.Store.LoadSettings()
	if err != nil {
		return nil, refused(err)
	}
	rs := settings[r.Key]
	secrets, err := secretMembers(rs.Secrets, r.Top, o.Home)
	if err != nil {
		return nil, refused(err, Step{"fix it, or opt out with: ", Command{Verb: VerbSecretsRemove, Args: []string{"ENTRY"}}})
	}
	if err := r.CheckFileSecrets(ctx, rs.Secrets); err != nil {
		return nil, refused(err, Step{"fix it, or opt out with: ", Command{Verb: VerbSecretsRemove, Args: []string{"ENTRY"}}})
	}

	// The laptop preflight.
	var findings []agentwire.Finding
	if runtime.GOOS == "windows" {
		findings = append(findings, agentwire.Finding{Check: "platform", Outcome: agentwire.Block, Detail: "offload needs rsync and runs on macOS and Linux only"})
	}
	// The laptop's rsync: each variant takes its own options, and one
	// that cannot do the job is refused here, before the box is asked.
	rsync, err := FindRsync(ctx, HostEnv(o.Environ, false))
	switch {
	case errors.Is(err, exec.ErrNotFound):
		findings = append(findings, agentwire.Finding{Check: "tools", Outcome: agentwire.Block, Detail: "rsync is not installed on this laptop; install it"})
	case err != nil && runtime.GOOS != "windows":
		return nil, refused(err)
	}
	excludes, err := r.ignored(ctx)
	if err != nil {
		return nil, err
	}
	if o.Preflight != nil {
		p := *o.Preflight
		p.Handover = handover
		p.Secrets = rs.Secrets
		p.SizeOK = rs.SizeOK
		p.ignored, p.haveIgnored = excludes, true
		if p.Size == nil {
			p.Size = func(ctx context.Context) (int64, error) {
				if rsync == nil {
					return 0, errors.New("no rsync")
				}
				return r.measure(ctx, rsync, HostEnv(o.Environ, false), excludes)
			}
		}
		findings = append(findings, p.Run(ctx, r)...)
	}
	if blocks := only(findings, agentwire.Block); len(blocks) > 0 {
		return nil, &Error{Code: ExitRefused, Err: errors.New("the preflight found a block"), Findings: blocks}
	}
	warns := slices.DeleteFunc(slices.Clone(findings), func(f agentwire.Finding) bool { return f.Outcome == agentwire.Block })
	env, err := DetectEnvironment(r.Top)
	if err != nil {
		return nil, refused(err, Step{"fix it, then run offload again"})
	}
	if err := r.snapshotReady(ctx); err != nil {
		return nil, err
	}
	bx, err := ahead.box()
	if err != nil {
		return nil, err
	}
	t := step("preflight", t0)

	// begin: the box half of the preflight; it takes the copy. From here
	// on the journal names each step before it runs.
	id := NewID()
	rec := &Record{ID: id, Repo: r.Key, Box: bx.ID, BoxName: bx.Name, Name: r.Name, Kind: o.Kind.Name(), Top: r.Top}
	dir := o.Store.RepoDir(r.Key)
	bpath := filepath.Join(dir, "offload.bundle")
	// rollback undoes what the steps so far did, the journal last, and
	// says what the box holds now.
	rollback := func(err error) error {
		stopped := ctx.Err() != nil
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		r.dropRefs(ctx, id)
		os.Remove(bpath)
		gave := giveBack(ctx, agent, r.Key, id, rec.Dir, rec.Name, rec.Copy)
		o.Store.removeRecordOf(r.Key, id)
		if stopped {
			return interrupted(rec.Step, "nothing changed here; "+gave, Step{"run offload again when you want to"})
		}
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Code: ExitFailed, Err: err}
		}
		next := []Step{{"nothing changed here; " + gave}}
		if lock := heldLock(err); lock != "" {
			next = append(next, say("another git process holds %s; when none is running, remove it (rm '%s') and run offload again", lock, lock))
		} else {
			next = append(next, Step{"run offload again when the cause is fixed"})
		}
		e.Next = append(next, e.Next...)
		return e
	}
	if err := o.journal(ctx, rec, StepBegin); err != nil {
		return nil, err
	}
	o.logf("begin in box %s", bx.Name)
	sessions, boxRsync := ahead.sessions(ctx, agent)
	begin, err := o.begin(ctx, agent, id, sessions)
	if e, ok := errors.AsType[*Error](err); ok && e.Code == ExitRefused {
		// The box changed nothing.
		o.Store.removeRecordOf(r.Key, id)
		return nil, err
	}
	if err != nil {
		return nil, rollback(err)
	}
	res.Begin = begin.BeginResult
	rec.Name, rec.Dir, rec.Copy, rec.Seen = begin.name, begin.Dir, begin.Copy, begin.seen
	warns = append(warns, only(begin.Findings, agentwire.Warn)...)
	if begin.CLI.BlockedBy() != "" && !slices.ContainsFunc(warns, func(f agentwire.Finding) bool { return f.Check == "hooks" }) {
		warns = append(warns, agentwire.Finding{Check: "hooks", Outcome: agentwire.Warn, Detail: begin.CLI.BlockedBy() + " in the box blocks hooks, so the box CLI's status will not be reported"})
	}
	if len(warns) > 0 && !o.Yes {
		// Give back what begin took: the copy, and the directory it made.
		giveBack(ctx, agent, r.Key, id, rec.Dir, rec.Name, rec.Copy)
		o.Store.removeRecordOf(r.Key, id)
		return nil, &Error{Code: ExitConfirm, Err: errors.New("the preflight found warnings"), Findings: warns,
			Next: []Step{{"go ahead anyway with: ", Command{Verb: VerbOffload, Kind: o.Kind.Name(), Yes: true}}}}
	}
	res.Warnings = warns
	t = step("begin", t)

	// Snapshot S; from here on a failure rolls back what it made.
	if err := o.journal(ctx, rec, StepSnapshot); err != nil {
		return nil, rollback(err)
	}
	if len(only(warns, agentwire.Confirm)) > 0 {
		if err := o.Store.UpdateSettings(r.Key, r.Top, func(s *RepoSettings) error { s.SizeOK = true; return nil }); err != nil {
			return nil, rollback(err)
		}
	}
	o.logf("snapshot")
	base, err := r.snapshot(ctx, id)
	if err != nil {
		return nil, rollback(err)
	}
	rec.Base = base
	t = step("snapshot", t)

	// rsync the work tree and .git without objects.
	if err := o.journal(ctx, rec, StepRsync); err != nil {
		return nil, rollback(err)
	}
	boxIgnored, err := r.stillIgnored(ctx, begin.Ignored)
	if err != nil {
		return nil, rollback(err)
	}
	exFile := filepath.Join(dir, "excludes")
	if err := writeExcludes(exFile, append(excludes, boxIgnored...)); err != nil {
		return nil, rollback(err)
	}
	rpath := remotePath(begin.Dir, begin.name)
	o.logf("rsync %s/ to %s:%s/", r.Top, bx.Name, rpath)
	opts := syncOpts{compress: !o.NoCompress}
	opts.choices = rsync.choices(boxRsync, opts.compress)
	// A first offload (no copy in the box) sends .git/objects as it is:
	// the packs need no index-pack there, which a bundle of the whole
	// history would. The refs as they were before it tell the bundle
	// what the box then has: only objects made since go in it.
	haveRefs := begin.Refs
	if begin.Copy == "absent" && r.plainObjects() {
		if haveRefs, err = r.refs(ctx); err != nil {
			return nil, rollback(err)
		}
		opts.objects = true
	}
	err = o.sync(ctx, rsync, exFile, bx.Name+":"+rpath, opts)
	os.Remove(exFile)
	if err != nil {
		return nil, rollback(err)
	}
	t = step("rsync", t)

	// The bundle and the stream.
	rec.StartedAtMS = o.now().UnixMilli()
	if err := o.journal(ctx, rec, StepSend); err != nil {
		return nil, rollback(err)
	}
	members, err := o.members(ctx, handover, env, haveRefs, secrets)
	if err != nil {
		return nil, rollback(err)
	}
	o.logf("send")
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	xctx, xcancel := context.WithCancel(ctx)
	defer xcancel()
	go func() {
		// The Exec sends its first read of the stream right behind its
		// start, and the rest once the box answers: written through a
		// buffer of that read's size (box's 128 KiB chunk), a second
		// offload's whole stream is that read, and costs no round trip
		// of its own (a bare pipe gave it the first tar header only).
		bw := bufio.NewWriterSize(pw, 128<<10)
		err := WriteStream(bw, members)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			// The Exec closes the box's stdin at any end of its own, and
			// a tar cut at a member's end reads as a whole one: the box
			// would start on a stream without the rest. So the Exec is
			// cut instead, and the box never sees the stream end.
			xcancel()
		} else {
			pw.Close()
		}
		werr <- err
	}()
	send, err := agent.Send(xctx, r.Key, o.Kind.Name(), id, pr)
	pr.CloseWithError(io.ErrClosedPipe)
	os.Remove(bpath)
	// A stream that broke on our side says why better than the box can.
	if e := <-werr; e != nil && !errors.Is(e, io.ErrClosedPipe) {
		err = e
	}
	if err != nil {
		// The answer may be lost after the box CLI started: then the
		// offload is in flight, and its record stays.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		_, started := release(sctx, agent, r.Key, id)
		cancel()
		if started {
			if serr := o.Store.settle(rec); serr != nil {
				return nil, serr
			}
			return nil, &Error{Code: ExitFailed, Err: fmt.Errorf("send: %w; the box CLI session of offload %s started all the same", err, id),
				Next: []Step{{"watch it with: ", Command{Verb: VerbInbox, Wait: 60}}, {"bring it home with: ", cmdBack}}}
		}
		return nil, rollback(err)
	}
	// The box CLI session started: the offload is in flight.
	if err := o.Store.settle(rec); err != nil {
		return nil, err
	}
	step("send", t)
	res.Record, res.Send = rec, send
	if send.Exited {
		// The offload is in flight on a stopped session: restart and
		// abandon take it from here, so the record stays.
		return nil, exitedError(o.Kind, o.Box, send.ExitLines, false)
	}
	return res, nil
}

// sync runs the rsync passes into the copy at dest (BOX:PATH): the work
// tree (syncArgs) and, when .git is a directory, .git by content
// (gitArgs), side by side: each pass costs its round trips (rsync's
// protocol: about five), and they share none, as the first leaves .git to
// the second but for the objects a first offload sends. A pass that fails
// lets the other end, so that no rsync still writes into the copy when a
// rollback gives it back; the error is the first to come.
func (o *Offloader) sync(ctx context.Context, rs *Rsync, exFile, dest string, opts syncOpts) error {
	r := o.Repo
	env := HostEnv(o.Environ, true)
	fi, err := os.Lstat(filepath.Join(r.Top, ".git"))
	gitPass := err == nil && fi.IsDir()
	opts.noGit = r.Linked || gitPass
	errs := make(chan error, 2)
	run := func(args []string) {
		_, err := rs.run(ctx, r.git.prep, env, args)
		errs <- err
	}
	passes := 1
	go run(append(rs.syncArgs(exFile, opts), "-e", o.Shim, r.Top+"/", dest+"/"))
	if gitPass {
		passes++
		go run(append(rs.gitArgs(opts.choices), "-e", o.Shim, r.Top+"/.git", dest+"/"))
	}
	var first error
	for range passes {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}

// journal writes rec as the journal of the offload's step before it runs.
func (o *Offloader) journal(ctx context.Context, rec *Record, step string) error {
	return o.Store.journal(ctx, rec, OpOffload, step, o.AtStep)
}

// exitedError reports a box CLI that exited before it took its first
// prompt (again: once more, after a restart), with its last lines as
// findings. A CLI that refused to run as root gets the box user's next
// steps first: restarting it as root cannot help.
func exitedError(k agentwire.Kind, box string, lines []string, again bool) *Error {
	e := &Error{Code: ExitFailed, Err: fmt.Errorf("%s exited in box %s before it took the first prompt", k.Title(), box), Next: StoppedNext()}
	if again {
		e.Err = fmt.Errorf("%s exited in box %s again before it took the prompt", k.Title(), box)
	}
	if k.RefusedRoot(lines) {
		e.Err = fmt.Errorf("%w: it refuses to run as root, and box %s runs it as root", e.Err, box)
		e.Next = append(slices.Clone(rootNext), e.Next...)
	}
	for _, l := range lines {
		e.Findings = append(e.Findings, agentwire.Finding{Check: k.Name(), Outcome: "output", Detail: printable.Line(l, 0)})
	}
	if len(lines) == 0 {
		e.Findings = append(e.Findings, agentwire.Finding{Check: k.Name(), Outcome: "output", Detail: "(its pane showed nothing)"})
	}
	return e
}

// rootNext are the next steps for a box CLI that refused to run as root:
// a local box served by root runs box commands as the box user `user` only
// when that account reaches its state directory and binaries
// (docs/cocoonbox.md "Served by root").
var rootNext = []Step{
	{"see why box commands run as root: ", Command{Verb: VerbLocalbox}},
	{"serve the local box from a state directory the box user reaches: ", Command{Verb: VerbLocalMove}, " (docs/cocoonbox.md \"Served by root\")"},
}

// stillInBoxNext are the next steps of an offload refused because an
// earlier one of the repository is in flight.
var stillInBoxNext = []Step{
	{"bring it home first: ", cmdBack},
	{"if its box session has stopped: ", cmdRestart, " starts it again, and ", cmdAbandon, " ends the offload, keeping the box's work in refs"},
}

// lookAhead is what offload asks the box service while the laptop
// preflight runs, as both only read: the box (List) and, when it is
// running, its sessions and its rsync's --version (status and `rsync
// --version` in one Exec; a status of a box that is not running would
// wake it). Their round trips then cost no time of their own, where they
// came after the preflight. A laptop block still refuses before the box
// is asked for anything that changes it (begin).
type lookAhead struct {
	done   chan struct{}
	cancel context.CancelFunc
	bx     box.Box
	err    error
	// ss are the box's sessions and rsync its rsync's --version when
	// asked (asked), ssErr the error then.
	ss    []agentwire.Session
	rsync string
	ssErr error
	asked bool
}

// lookAhead starts asking the box service for the box and its sessions.
func (o *Offloader) lookAhead(ctx context.Context, a *Agent) *lookAhead {
	ctx, cancel := context.WithCancel(ctx)
	l := &lookAhead{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(l.done)
		if l.bx, l.err = o.findBox(ctx); l.err != nil || l.bx.State != "running" {
			return
		}
		l.ss, l.rsync, l.ssErr = a.StatusRsync(ctx)
		l.asked = true
	}()
	return l
}

// box is the box findBox found, once it answered.
func (l *lookAhead) box() (box.Box, error) {
	<-l.done
	return l.bx, l.err
}

// sessions are the box's sessions and its rsync's --version, asked now
// when the look-ahead did not. An error means none: the inbox may be
// down, which begin then says.
func (l *lookAhead) sessions(ctx context.Context, a *Agent) ([]agentwire.Session, string) {
	<-l.done
	if !l.asked {
		l.ss, l.rsync, l.ssErr = a.StatusRsync(ctx)
	}
	if l.ssErr != nil {
		return nil, ""
	}
	return l.ss, l.rsync
}

// stop ends what the look-ahead still asks and waits for it.
func (l *lookAhead) stop() {
	l.cancel()
	<-l.done
}

// begin picks the copy's name from the box's sessions ss and runs begin.
// A name another repo's copy (or a directory that is no copy) holds in the
// box is refused by the box; then begin runs once more with the name made
// unique by the repo key.
func (o *Offloader) begin(ctx context.Context, a *Agent, id string, ss []agentwire.Session) (*beginAnswer, error) {
	r := o.Repo
	name, mine := pickName(ss, r.Key, r.Name)
	// The outbox keeps earlier offloads' entries; inbox starts after them.
	var seen int64
	for _, s := range ss {
		if s.Repo == r.Key {
			seen = int64(s.OutboxSeq)
		}
	}
	for {
		b, err := a.Begin(ctx, r.Key, name, o.Kind.Name(), id)
		if err == nil {
			return &beginAnswer{BeginResult: b, name: name, seen: seen}, nil
		}
		var ae *AgentError
		if !mine && name == r.Name && errors.As(err, &ae) && ae.Refused() && onlyCopyBlocks(ae.Findings) {
			name = uniqueName(r.Name, r.Key)
			continue
		}
		return nil, o.beginError(err, mine)
	}
}

// beginAnswer is begin's answer, the name it was asked with, and the
// repo's last outbox seq before it.
type beginAnswer struct {
	*agentwire.BeginResult
	name string
	seen int64
}

func onlyCopyBlocks(fs []agentwire.Finding) bool {
	n := 0
	for _, f := range fs {
		if f.Outcome == agentwire.Block {
			if f.Check != "copy" {
				return false
			}
			n++
		}
	}
	return n > 0
}

// pickName is the copy's name: the one the box keeps for this repo key
// when its copy is there (mine), else the repository's name, else, when
// another repo's copy has that, the name made unique by the repo key.
func pickName(ss []agentwire.Session, key, name string) (string, bool) {
	taken := map[string]bool{}
	for _, s := range ss {
		if s.Copy == "" || s.Copy == "absent" {
			continue
		}
		if s.Repo == key && s.Name != "" {
			return s.Name, true
		}
		taken[s.Name] = true
	}
	if taken[name] {
		return uniqueName(name, key), false
	}
	return name, false
}

// uniqueName is name, a '-' and the repo key's first 6 hex digits, within
// the box's 100 characters.
func uniqueName(name, key string) string {
	suffix := "-" + key[:min(6, len(key))]
	return name[:min(len(name), 100-len(suffix))] + suffix
}

// release gives back the copy begin took for offload id, unless a box CLI
// session started on it. It reports whether the box holds no copy for id
// now, and whether a session of id started.
func release(ctx context.Context, a *Agent, key, id string) (released, started bool) {
	ss, err := a.Status(ctx, key)
	if err != nil {
		return false, false
	}
	for _, s := range ss {
		if s.Repo != key {
			continue
		}
		if s.OffloadID != id {
			return true, false
		}
		if s.Copy == "busy" || s.Copy == "unreturned" {
			return false, true
		}
		return a.End(ctx, key) == nil, false
	}
	return true, false
}

// giveBack gives back the copy begin took for offload id after a failure
// (no box CLI session started on it) and says what the box holds now. dir
// and name are the copy's as begin answered them, copy its state as begin
// found it ("" when begin's answer never came). A copy this offload made
// (begin found none) is removed, as it may be half synced, with no history
// yet; one that was there before stays, as the box's mirror, and the next
// offload syncs it again.
func giveBack(ctx context.Context, a *Agent, key, id, dir, name, copy string) string {
	shown := dir
	if shown == "" {
		shown = name
	}
	if released, _ := release(ctx, a, key, id); !released {
		return fmt.Sprintf("box %s may still hold its copy %s for offload %s, which the next offload takes again", a.Box, shown, id)
	}
	switch copy {
	case "":
		return fmt.Sprintf("box %s holds nothing of it now", a.Box)
	case "absent":
	default:
		return fmt.Sprintf("box %s gave back its copy %s, maybe partly synced, which the next offload syncs again", a.Box, shown)
	}
	if err := removeCopy(ctx, a, remotePath(dir, name)); err != nil {
		return fmt.Sprintf("box %s gave back the copy %s that this offload made, but could not remove it (%v); the next offload syncs it again", a.Box, shown, err)
	}
	return fmt.Sprintf("box %s gave back and removed the copy %s that this offload made", a.Box, shown)
}

// removeCopy removes a copy begin made for an offload in the box, path
// relative to its workspace. Only a copy begin found absent (none, an
// empty directory, or one that is no git repository) is removed: nothing
// in it is the box's.
func removeCopy(ctx context.Context, a *Agent, path string) error {
	var errb bytes.Buffer
	st, err := a.Exec.Exec(ctx, &box.Command{Box: a.Box, Line: "rm -rf -- " + shellquote.Word(path), Stderr: &errb})
	if err != nil {
		return err
	}
	msg, _, _ := strings.Cut(strings.TrimSpace(errb.String()), "\n")
	switch {
	case st.Error != "":
		return errors.New(st.Error)
	case st.Signal != "":
		return errors.New("rm was " + st.Text())
	case st.Code != 0:
		return fmt.Errorf("rm exited %d: %s", st.Code, msg)
	}
	return nil
}

// members are the send stream's members in the contract's order.
func (o *Offloader) members(ctx context.Context, handover []byte, env *agentwire.Environment, boxRefs map[string]string, secrets []Member) ([]Member, error) {
	r := o.Repo
	ej, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writePrivate(filepath.Join(o.Store.RepoDir(r.Key), "env.json"), ej); err != nil {
		return nil, err
	}
	ms := []Member{{Name: "handover.md", Data: handover}, {Name: "env.json", Data: ej}}
	bpath := filepath.Join(o.Store.RepoDir(r.Key), "offload.bundle")
	// Run holds the repo's lock, so a bundle lock is left from a run of
	// an earlier version (whose git wrote the bundle itself) that died.
	os.Remove(bpath + ".lock")
	o.logf("bundle")
	if ok, err := r.bundle(ctx, bpath, boxRefs); err != nil {
		return nil, err
	} else if ok {
		ms = append(ms, Member{Name: "offload.bundle", Path: bpath})
	}
	if r.Linked {
		ms = append(ms, Member{Name: "HEAD", Path: filepath.Join(r.GitDir, "HEAD")})
		if _, err := os.Lstat(filepath.Join(r.GitDir, "index")); err == nil {
			ms = append(ms, Member{Name: "index", Path: filepath.Join(r.GitDir, "index")})
		}
	}
	return append(ms, secrets...), nil
}

// writePrivate writes a file of the repo's directory atomically, 0600.
func writePrivate(p string, b []byte) error {
	return atomicfile.WriteFile(p, b, 0o600)
}

// CheckFileSecrets refuses a file: entry whose file git does not ignore:
// it would travel by rsync and in S, or, tracked, with the history.
func (r *Repo) CheckFileSecrets(ctx context.Context, entries []string) error {
	for _, e := range entries {
		p, ok := strings.CutPrefix(e, "file:")
		if !ok {
			continue
		}
		if out, err := r.git.line(ctx, "ls-files", "--", p); err != nil {
			return err
		} else if out != "" {
			return fmt.Errorf("secret %s is tracked by git, so it would travel with the history; untrack it and add it to .gitignore", e)
		}
		if ok, err := r.git.ok(ctx, "check-ignore", "-q", "--", p); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("secret %s is not git-ignored, so it would travel with the work tree; add it to .gitignore", e)
		}
	}
	return nil
}

// findBox finds the box and refuses an image older than cbdesk:v22.
func (o *Offloader) findBox(ctx context.Context) (box.Box, error) {
	bs, err := o.Client.List(ctx)
	if err != nil {
		return box.Box{}, err
	}
	for _, b := range bs {
		if b.Name == o.Box || b.ID == o.Box {
			if n, ok := cbdeskVersion(b.Image); ok && n < 22 {
				return b, &Error{Code: ExitRefused, Err: errors.New("the preflight found a block"),
					Findings: []agentwire.Finding{{Check: "box_image", Outcome: agentwire.Block, Detail: fmt.Sprintf("box %s runs %s; offload needs cbdesk:v22 or later: upgrade the box first", b.Name, b.Image)}}}
			}
			return b, nil
		}
	}
	return box.Box{}, refused(fmt.Errorf("no box named %s", o.Box), Step{"see your boxes with: ", Command{Verb: VerbBoxes}})
}

func cbdeskVersion(image string) (int, bool) {
	i := strings.LastIndex(image, "cbdesk:v")
	if i < 0 {
		return 0, false
	}
	v := image[i+len("cbdesk:v"):]
	if j := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
		v = v[:j]
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// beginError maps begin's failure: a refusal exits 3 with its findings
// under one line of ours, and the commands that fix each: for the box CLI
// of the kind asked for, for a copy in the way. mine says the box keeps a
// copy for this repo key.
func (o *Offloader) beginError(err error, mine bool) error {
	var ae *AgentError
	if !errors.As(err, &ae) {
		return &Error{Code: ExitFailed, Err: err}
	}
	if !ae.Refused() {
		code := ExitFailed
		if ae.Code == "usage" {
			code = ExitRefused
		}
		return &Error{Code: code, Err: fmt.Errorf("box %s: begin: %s", o.Box, ae.Msg)}
	}
	e := &Error{Code: ExitRefused, Err: fmt.Errorf("box %s refused the offload", o.Box), Findings: ae.Findings}
	if len(ae.Findings) == 0 {
		e.Err = fmt.Errorf("box %s refused the offload: %s", o.Box, ae.Msg)
	}
	k := o.Kind.Name()
	if cli := ae.CLI; cli != nil {
		switch {
		case cli.Version == "":
			e.Next = append(e.Next, Step{"install " + o.Kind.Title() + " in the box: ", Command{Verb: VerbInstallCLI, Kind: k, Box: o.Box}})
			e.Next = append(e.Next, Step{"then sign in there: ", Command{Verb: VerbSignIn, Kind: k, Box: o.Box}})
		case !cli.SignedIn:
			e.Next = append(e.Next, Step{"sign in to " + o.Kind.Title() + " in the box: ", Command{Verb: VerbSignIn, Kind: k, Box: o.Box}})
		}
	}
	checks := map[string]bool{}
	for _, f := range ae.Findings {
		if f.Outcome == agentwire.Block {
			checks[f.Check] = true
		}
	}
	switch {
	case checks["copy"] && mine:
		// This laptop has no record (Run checked), yet the box holds an
		// offload of the repository that did not come back.
		e.Next = append(e.Next, Step{"the box still holds an earlier offload of this repository that this laptop has no record of; end it, keeping its work in refs: ", Command{Verb: VerbAbandon, Box: o.Box}})
	case checks["copy"]:
		e.Next = append(e.Next, Step{"move the directory the finding names out of the way in the box (", Command{Verb: VerbRsh, Box: o.Box, Args: []string{"mv", "…"}}, "), then offload again"})
	}
	if checks["sessions"] {
		e.Next = append(e.Next, Step{"see them with: ", Command{Verb: VerbStatus, Box: o.Box}})
	}
	return e
}

func only(fs []agentwire.Finding, outcome string) []agentwire.Finding {
	var out []agentwire.Finding
	for _, f := range fs {
		if f.Outcome == outcome {
			out = append(out, f)
		}
	}
	return out
}

// stoppedNext are the ways out of an offload whose box CLI session is not
// running, so that back cannot ask it for its work.
var stoppedNext = []Step{
	{"start it again from its last hand-over: ", cmdRestart},
	{"or end the offload, keeping the box's work in refs here: ", cmdAbandon},
}

// stoppedError is the box's refusal of a message or BACK for want of a
// running box CLI session, as an *Error (exit 3) whose next steps restart
// the session or abandon the offload; nil for any other error.
func stoppedError(err error) *Error {
	var ae *AgentError
	if !errors.As(err, &ae) || ae.Verb != "send" || !ae.Refused() {
		return nil
	}
	return &Error{Code: ExitRefused, Err: errors.New("the box CLI session of this offload is not running"), Next: stoppedNext}
}

// MessageError maps a failure of `offload send`: a stopped session names
// the ways out.
func MessageError(err error) error {
	if e := stoppedError(err); e != nil {
		return e
	}
	return err
}

// StoppedNext are the next steps for an offload whose box CLI session has
// stopped: restart it, or abandon the offload.
func StoppedNext() []Step { return slices.Clone(stoppedNext) }

// Restart starts the box CLI session of the repository's offload afresh
// from its last hand-over (contract "Verbs", restart), under the repo's
// lock. A box that refuses (no session of it, as after end) is an *Error
// naming abandon.
func Restart(ctx context.Context, st Store, key string, x Execer) (*Record, error) {
	unlock, err := st.Lock(key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := st.LoadRecord(key)
	if errors.Is(err, ErrNoRecord) {
		return nil, refused(err, Step{"offload it first: ", Command{Verb: VerbOffload, Kind: "KIND"}})
	}
	if err != nil {
		return nil, err
	}
	if rec.Op != "" {
		return nil, refused(errors.New(interruptedLine(rec)), interruptedNext)
	}
	a := &Agent{Exec: x, Box: rec.BoxName}
	res, err := a.Restart(ctx, key)
	err = GoneError(ctx, x, rec, err)
	if err == nil && res.Exited {
		return nil, exitedError(agentwire.KindOf(rec.Kind), rec.BoxName, res.ExitLines, true)
	}
	if err != nil {
		var ae *AgentError
		if errors.As(err, &ae) && ae.Refused() {
			return nil, refused(fmt.Errorf("box %s refused the restart: %s", rec.BoxName, ae.Msg),
				Step{"if it has no session to restart, end the offload, keeping the box's work in refs here: ", cmdAbandon})
		}
		return nil, err
	}
	return rec, nil
}
