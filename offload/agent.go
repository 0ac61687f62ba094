package offload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// Execer runs a command in a box; *box.Client is one.
type Execer interface {
	Exec(ctx context.Context, cmd *box.Command) (box.ExitStatus, error)
}

// maxAgentOutput bounds one verb's stdout, in bytes: read carries bodies,
// each a hand-over of at most 256 KiB.
const maxAgentOutput = 64 << 20

// Agent drives the box half, `cocoonbox-agent offload <verb>`, in one box
// over Exec (contract "Verbs").
type Agent struct {
	// Exec runs the commands.
	Exec Execer
	// Box is the box's name or id.
	Box string
	// Progress receives the verbs' stderr, their progress for a human; nil
	// discards it.
	Progress io.Writer
	// Env is added to the verbs' environment; nil adds nothing.
	Env map[string]string
}

// AgentError is a verb that answered {"ok":false,...}, or could not run.
type AgentError struct {
	// Verb is the verb, such as "begin".
	Verb string
	// Code is the answer's code: usage, refused, failed or inbox; empty
	// when the verb did not answer.
	Code string
	// Msg is the answer's one-line error.
	Msg string
	// Exit is the verb's exit status.
	Exit int
	// Findings and CLI come with a begin refusal.
	Findings []agentwire.Finding
	CLI      *agentwire.CLIInfo
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("box: offload %s: %s", e.Verb, e.Msg)
}

// Refused reports a refusal: the box changed nothing.
func (e *AgentError) Refused() bool { return e.Code == agentwire.CodeRefused }

// Begin runs begin: the box half of the preflight, then takes the copy.
func (a *Agent) Begin(ctx context.Context, key, name, kind, id string) (*agentwire.BeginResult, error) {
	var r agentwire.BeginResult
	err := a.call(ctx, nil, &r, agentwire.Begin.Argv(agentwire.BeginRequest{Repo: key, Name: name, Kind: kind, ID: id}))
	return &r, err
}

// Send runs send with the stream on its stdin.
func (a *Agent) Send(ctx context.Context, key, kind, id string, stream io.Reader) (*agentwire.SendResult, error) {
	var r agentwire.SendResult
	err := a.call(ctx, stream, &r, agentwire.Send.Argv(agentwire.SendRequest{Repo: key, Kind: kind, ID: id}))
	return &r, err
}

// Message runs send --message with text on its stdin.
func (a *Agent) Message(ctx context.Context, key, text string) (*agentwire.MessageResult, error) {
	var r agentwire.MessageResult
	err := a.call(ctx, strings.NewReader(text), &r, agentwire.Send.Argv(agentwire.SendRequest{Repo: key, Message: true}))
	return &r, err
}

// SendBack runs send --back, with --interrupt when asked.
func (a *Agent) SendBack(ctx context.Context, key string, interrupt bool) (*agentwire.MessageResult, error) {
	var r agentwire.MessageResult
	err := a.call(ctx, strings.NewReader(""), &r, agentwire.Send.Argv(agentwire.SendRequest{Repo: key, Back: true, Interrupt: interrupt}))
	return &r, err
}

// Read runs read: outbox entries after since, long-polling up to wait
// (rounded up to whole seconds).
func (a *Agent) Read(ctx context.Context, key string, since int64, wait time.Duration) (*agentwire.ReadResult, error) {
	var r agentwire.ReadResult
	req := agentwire.ReadRequest{Repo: key, Since: int(since)}
	if wait > 0 {
		req.Wait = int((wait + time.Second - 1) / time.Second)
	}
	err := a.call(ctx, nil, &r, agentwire.Read.Argv(req))
	return &r, err
}

// Status runs status, for one repo or, with key empty, all.
func (a *Agent) Status(ctx context.Context, key string) ([]agentwire.Session, error) {
	var r agentwire.StatusResult
	err := a.call(ctx, nil, &r, agentwire.Status.Argv(agentwire.RepoRequest{Repo: key}))
	return r.Sessions, err
}

// BackStart is what the start of back's wait found (Agent.BackStart).
type BackStart struct {
	// Outbox is the repo's outbox from its start.
	Outbox *agentwire.ReadResult
	// Sent says BACK was sent: the copy held no S' of the offload. Then
	// Sessions are the sessions status found before it, Message send's
	// answer, and Read the read that waited after the last entry of
	// Outbox; nil when Outbox has a fault, for which the box does not
	// wait.
	Sent     bool
	Sessions []agentwire.Session
	Message  *agentwire.MessageResult
	Read     *agentwire.ReadResult
	// Bundle says the bundle asked for (BundleAsk) was written: the copy
	// held S' when the reads were done. Branches are then the copy's
	// branches (refs/heads/<name> to its commit), those the bundle leaves
	// out, as the haves reach them, among them.
	Bundle   bool
	Branches map[string]string
}

// BundleAsk asks BackStart for the box copy's history in the same Exec:
// a bundle (git bundle create) of its branches and S' without what Haves
// reach, written to Path.
type BundleAsk struct {
	// Haves are commits this repository has (its branches, HEAD, S); the
	// box leaves out what any of them it has reaches.
	Haves []string
	// Path is the file the bundle goes to, made 0600.
	Path string
}

// answerMark ends each verb's stdout in BackStart's Exec, with the
// verb's exit status; refsMark starts the copy's branches after them,
// and bundleMark the bundle after those.
const (
	answerMark = "@cocoonbox-verb-exit"
	refsMark   = "@cocoonbox-refs"
	bundleMark = "@cocoonbox-bundle"
)

// BackStart starts back's wait in one Exec, one round trip where it took
// four (contract "Back, Mac side" 1 and 2, in their order): read of the
// repo's outbox from its start; then, unless the copy at path (relative
// to the box's workspace) holds refs/cocoonbox/back/<id> (S', which post
// --back makes before it posts: the box agent posted back, or is posting
// it), status, send --back, and read --wait up to wait after the last
// entry the first read returned, each only when the one before it
// succeeded, the wait only when the first read names no fault (a CLI at a
// dialog would hold it for nothing). The first verb that failed is the error, an *AgentError
// naming it. With ask, and S' in the copy once the reads are done, a
// bundle of the copy's branches and S' follows on stdout (BundleAsk),
// which the box makes with git bundle create, leaving out what the haves
// it has reach: the history comes with the hand-over, and no git fetch
// costs its two round trips after it.
func (a *Agent) BackStart(ctx context.Context, key, id, path string, wait time.Duration, ask *BundleAsk) (*BackStart, error) {
	read0 := commandLine(agentwire.Read.Argv(agentwire.ReadRequest{Repo: key}))
	status := commandLine(agentwire.Status.Argv(agentwire.RepoRequest{Repo: key}))
	back := commandLine(agentwire.Send.Argv(agentwire.SendRequest{Repo: key, Back: true}))
	// The wait's since is the last seq the first read printed: a seq is
	// a number after its key, and a body's quotes are escaped, so no
	// body holds the key. None found is 0, a read that returns at once.
	readw := commandLine(agentwire.Read.Argv(agentwire.ReadRequest{Repo: key, Since: -1, Wait: int((wait + time.Second - 1) / time.Second)}))
	readw = strings.Replace(readw, "--since -1", `--since "${n:-0}"`, 1)
	mark := `s=$?; printf '\n%s %d\n' ` + answerMark + ` "$s"`
	line := `r=$(` + read0 + ` </dev/null); s=$?; printf '%s\n%s %d\n' "$r" ` + answerMark + ` "$s"
if ! git -C ` + shellquote.Word(path) + ` rev-parse -q --verify ` + shellquote.Word(RefBack+id) + ` >/dev/null 2>&1; then
n=$(printf '%s\n' "$r" | grep -o '"seq": *[0-9]*' | tr -dc '0-9\n' | sort -n | tail -n 1)
` + status + ` </dev/null; ` + mark + `
if [ "$s" = 0 ]; then ` + back + ` </dev/null; ` + mark + `; fi
case $r in *'"fault"'*) ;; *) if [ "$s" = 0 ]; then ` + readw + ` </dev/null; ` + mark + `; fi ;; esac
fi`
	var stdin io.Reader
	out := &bundleWriter{}
	out.text.max = maxAgentOutput
	if ask != nil {
		// The haves on stdin, as a command line has room for few: those
		// the copy has are commits cat-file finds there.
		copyGit := "git -C " + shellquote.Word(path)
		line += `
if ` + copyGit + ` rev-parse -q --verify ` + shellquote.Word(RefBack+id) + ` >/dev/null 2>&1; then
h=$(` + copyGit + ` cat-file --batch-check='%(objectname) %(objecttype)' | sed -n 's/ commit$//p')
printf '%s\n' ` + refsMark + `
` + copyGit + ` for-each-ref --format='%(objectname) %(refname)' refs/heads/
printf '%s\n' ` + bundleMark + `
` + copyGit + ` bundle create -q - --branches ` + shellquote.Word(RefBack+id) + ` --not $h </dev/null
fi`
		stdin = strings.NewReader(strings.Join(ask.Haves, "\n") + "\n")
		out.path = ask.Path
		defer out.close()
	}
	st, err := a.exec(ctx, stdin, line, out)
	if err != nil {
		return nil, err
	}
	stdout := out.text.Bytes()
	answers := splitAnswers(stdout)
	if st.Error != "" || st.Signal != "" || len(answers) == 0 {
		// The Exec itself failed: the first verb's answer says how.
		if len(answers) == 0 {
			answers = []verbAnswer{{out: stdout}}
		}
		answers[0].st.Error, answers[0].st.Signal = st.Error, st.Signal
		if st.Error == "" && st.Signal == "" {
			answers[0].st.Code = st.Code
		}
		answers = answers[:1]
	}
	bs := &BackStart{Outbox: &agentwire.ReadResult{}}
	if err := a.answer("read", answers[0].out, answers[0].st, bs.Outbox); err != nil {
		return nil, err
	}
	if bs.Bundle = out.close() == nil && out.n > 0; bs.Bundle {
		bs.Branches = branchList(stdout)
	}
	if len(answers) == 1 {
		return bs, nil
	}
	bs.Sent = true
	var sr agentwire.StatusResult
	bs.Message, bs.Read = &agentwire.MessageResult{}, &agentwire.ReadResult{}
	for i, v := range []struct {
		verb string
		out  any
	}{{"status", &sr}, {"send", bs.Message}, {"read", bs.Read}} {
		if i+1 >= len(answers) {
			if v.verb == "read" && bs.Outbox.Fault != nil {
				// The box skipped the wait: the session has a fault, which
				// the laptop weighs before it waits (Backer.waitBack).
				bs.Read = nil
				break
			}
			return nil, &AgentError{Verb: v.verb, Msg: "no answer", Exit: 255}
		}
		if err := a.answer(v.verb, answers[i+1].out, answers[i+1].st, v.out); err != nil {
			return nil, err
		}
	}
	bs.Sessions = sr.Sessions
	return bs, nil
}

// StatusRsync runs status of every repo and, in the same Exec, the box's
// `rsync --version`, which says what its rsync can agree on with the
// laptop's up front (Rsync.choices). It returns the sessions and that
// output, "" when the box has no rsync on its PATH.
func (a *Agent) StatusRsync(ctx context.Context) ([]agentwire.Session, string, error) {
	mark := `; printf '\n%s %d\n' ` + answerMark + ` "$?"`
	line := commandLine(agentwire.Status.Argv(agentwire.RepoRequest{})) + " </dev/null" + mark +
		"\nrsync --version 2>/dev/null </dev/null" + mark
	stdout, st, err := a.run(ctx, nil, line)
	if err != nil {
		return nil, "", err
	}
	answers := splitAnswers(stdout)
	if st.Error != "" || st.Signal != "" || len(answers) == 0 {
		answers = []verbAnswer{{out: stdout, st: st}}
	}
	var r agentwire.StatusResult
	if err := a.answer("status", answers[0].out, answers[0].st, &r); err != nil {
		return nil, "", err
	}
	version := ""
	if len(answers) > 1 && answers[1].st.Code == 0 {
		version = string(answers[1].out)
	}
	return r.Sessions, version, nil
}

// branchList reads the copy's branches that follow refsMark in stdout:
// lines "<oid> refs/heads/<name>"; others are not taken.
func branchList(stdout []byte) map[string]string {
	_, list, ok := bytes.Cut(stdout, []byte("\n"+refsMark+"\n"))
	if !ok {
		return nil
	}
	bs := map[string]string{}
	for _, l := range strings.Split(string(list), "\n") {
		oid, ref, ok := strings.Cut(l, " ")
		if ok && strings.HasPrefix(ref, "refs/heads/") && isOID(oid) {
			bs[ref] = oid
		}
	}
	return bs
}

// bundleWriter is BackStart's stdout: text into text until a line
// bundleMark, the rest (the bundle) into a file at path made 0600.
type bundleWriter struct {
	text limitedBuffer
	path string
	f    *os.File
	n    int64
	err  error
}

func (w *bundleWriter) Write(p []byte) (int, error) {
	if w.f != nil || w.err != nil {
		return w.bundle(p), nil
	}
	mark := []byte("\n" + bundleMark + "\n")
	from := max(0, w.text.Len()-len(mark)+1)
	if _, err := w.text.Write(p); err != nil {
		return 0, err
	}
	b := w.text.Bytes()
	i := bytes.Index(b[from:], mark)
	if i < 0 || w.path == "" {
		return len(p), nil
	}
	i += from
	rest := bytes.Clone(b[i+len(mark):])
	w.text.Truncate(i + 1)
	w.f, w.err = os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	w.bundle(rest)
	return len(p), nil
}

// bundle writes p to the bundle's file; a failure to is kept for close
// and the rest dropped, so that the verbs' answers still come.
func (w *bundleWriter) bundle(p []byte) int {
	if w.err == nil {
		n, err := w.f.Write(p)
		w.n += int64(n)
		w.err = err
	}
	return len(p)
}

// close closes the bundle's file and returns the first error of its
// writes; a bundle never started is no error.
func (w *bundleWriter) close() error {
	if w.f != nil {
		if err := w.f.Close(); w.err == nil {
			w.err = err
		}
		w.f = nil
	}
	return w.err
}

// verbAnswer is one verb's stdout in an Exec of several, and its exit
// status.
type verbAnswer struct {
	out []byte
	st  box.ExitStatus
}

// splitAnswers splits the stdout of an Exec of several verbs at the
// lines answerMark ends each with.
func splitAnswers(stdout []byte) []verbAnswer {
	var as []verbAnswer
	var cur []byte
	for _, l := range bytes.SplitAfter(stdout, []byte("\n")) {
		if code, ok := bytes.CutPrefix(bytes.TrimSpace(l), []byte(answerMark+" ")); ok {
			n, err := strconv.Atoi(string(code))
			if err != nil {
				n = 255
			}
			as = append(as, verbAnswer{out: cur, st: box.ExitStatus{Code: n}})
			cur = nil
			continue
		}
		cur = append(cur, l...)
	}
	return as
}

// End runs end: the session ends, secrets are wiped, the copy returned.
func (a *Agent) End(ctx context.Context, key string) error {
	return a.call(ctx, nil, nil, agentwire.End.Argv(agentwire.RepoRequest{Repo: key}))
}

// Restart runs restart: the inbox starts the repo's CLI session afresh
// from its last hand-over (the box agent's, else the one it started from).
func (a *Agent) Restart(ctx context.Context, key string) (*agentwire.RestartResult, error) {
	var r agentwire.RestartResult
	err := a.call(ctx, nil, &r, agentwire.Restart.Argv(agentwire.RepoRequest{Repo: key}))
	return &r, err
}

// call runs one verb, args as a Verb's Argv makes them, decodes its JSON
// line into out and turns {"ok":false} into an *AgentError.
func (a *Agent) call(ctx context.Context, stdin io.Reader, out any, args []string) error {
	stdout, st, err := a.run(ctx, stdin, commandLine(args))
	if err != nil {
		return err
	}
	return a.answer(args[1], stdout, st, out)
}

// commandLine is the box's command line of a verb, args as a Verb's Argv
// makes them.
func commandLine(args []string) string {
	words := append([]string{agentwire.Program}, args...)
	for i, w := range words {
		words[i] = shellquote.Word(w)
	}
	return strings.Join(words, " ")
}

// run runs a command line of verbs in one Exec and returns its stdout.
func (a *Agent) run(ctx context.Context, stdin io.Reader, line string) ([]byte, box.ExitStatus, error) {
	var stdout limitedBuffer
	stdout.max = maxAgentOutput
	st, err := a.exec(ctx, stdin, line, &stdout)
	return stdout.Bytes(), st, err
}

// exec runs a command line in one Exec, its stdout to stdout.
func (a *Agent) exec(ctx context.Context, stdin io.Reader, line string, stdout io.Writer) (box.ExitStatus, error) {
	return a.Exec.Exec(ctx, &box.Command{
		Box:      a.Box,
		Line:     line,
		Env:      a.Env,
		Stdin:    stdin,
		Stdout:   stdout,
		Stderr:   a.Progress,
		Progress: a.Progress,
	})
}

// answer decodes a verb's stdout, which ended as st, into out, and turns
// {"ok":false} or no answer into an *AgentError.
func (a *Agent) answer(verb string, stdout []byte, st box.ExitStatus, out any) error {
	if st.Error != "" {
		return &AgentError{Verb: verb, Msg: st.Error, Exit: 255}
	}
	if st.Signal != "" {
		return &AgentError{Verb: verb, Msg: st.Text(), Exit: 255}
	}
	line := lastLine(stdout)
	if len(line) == 0 {
		msg := fmt.Sprintf("no answer (exit status %d)", st.Code)
		if st.Code == 127 {
			msg = agentwire.Program + " is not installed in box " + a.Box + "; upgrade the box first"
		}
		return &AgentError{Verb: verb, Msg: msg, Exit: st.Code}
	}
	var head agentwire.Failure
	if err := json.Unmarshal(line, &head); err != nil {
		return &AgentError{Verb: verb, Msg: fmt.Sprintf("answer is not JSON: %v", err), Exit: st.Code}
	}
	if !head.OK {
		if head.Error == "" {
			head.Error = fmt.Sprintf("failed (exit status %d)", st.Code)
		}
		return &AgentError{Verb: verb, Code: head.Code, Msg: head.Error, Exit: st.Code, Findings: head.Findings, CLI: head.CLI}
	}
	if out != nil {
		if err := json.Unmarshal(line, out); err != nil {
			return &AgentError{Verb: verb, Msg: fmt.Sprintf("answer does not parse: %v", err), Exit: st.Code}
		}
	}
	return nil
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, "\r\n\t ")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return bytes.TrimSpace(b)
}

// limitedBuffer keeps at most max bytes and fails a write past that.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

var errTooMuchOutput = errors.New("the box half's answer is too large")

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errTooMuchOutput
	}
	return b.Buffer.Write(p)
}
