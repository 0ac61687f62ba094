package offload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	verb := args[1]
	words := append([]string{agentwire.Program}, args...)
	for i, w := range words {
		words[i] = shellquote.Word(w)
	}
	var stdout limitedBuffer
	stdout.max = maxAgentOutput
	st, err := a.Exec.Exec(ctx, &box.Command{
		Box:      a.Box,
		Line:     strings.Join(words, " "),
		Env:      a.Env,
		Stdin:    stdin,
		Stdout:   &stdout,
		Stderr:   a.Progress,
		Progress: a.Progress,
	})
	if err != nil {
		return err
	}
	if st.Error != "" {
		return &AgentError{Verb: verb, Msg: st.Error, Exit: 255}
	}
	if st.Signal != "" {
		return &AgentError{Verb: verb, Msg: st.Text(), Exit: 255}
	}
	line := lastLine(stdout.Bytes())
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
