// Package modeltest is a scripted model endpoint for tests: enough of the
// Anthropic Messages API and of the OpenAI Responses API, both streaming,
// for the real Claude Code and Codex CLIs to carry out a scripted task.
//
// It is a test fixture, not a model. Each answer is computed from the
// request alone, so it holds no session state: the turn's plan comes from
// the latest user text of the conversation (its "model:" lines, or the
// BACK instruction of cocoonbox-agent), and the steps done so far are the
// tool calls the assistant made after it. A plan step is a shell command,
// run through the CLI's own shell tool (claude's Bash, codex's shell);
// when every step has its result the turn ends with a line of text.
//
// The prompt lines it understands:
//
//	model: bash CMD      run CMD through the CLI's shell tool
//	model: progress      write a complete hand-over to the path the first
//	                     prompt names and post it with --progress
//	model: tool NAME [JSON]
//	                     call the tool NAME that the request offers (an
//	                     MCP server's tool as the CLI names it, such as
//	                     claude's mcp__SERVER__NAME or codex's, matched by
//	                     the part after the last "__") with the JSON
//	                     object as its arguments ({} when absent)
//	model: fail STATUS   answer the request that would call this step
//	                     with HTTP status STATUS (400-599) in the vendor's
//	                     error body, as SetFault does: the turn fails
//	                     after the steps before it ran (every retry of
//	                     that request fails too)
//
// and a prompt that starts "BACK:" (cocoonbox-agent's BACK instruction)
// commits what is left, writes the hand-over to the path it names and
// runs the post --back it names, after its own model: lines.
//
// The requests of the commands cocoonbox setup installs are followed as
// they read (request.go): /cocoonbox:offload (and offload
// --handover-prompt) writes a hand-over by the request's rules, the
// user's model: lines in its Next steps, and runs the command it names;
// /cocoonbox:back runs the command it names. The turn of such a request
// ends with "Done. The command said:" and the last command's output, as a
// model relays exit 3 and 4 findings to the user; any other turn ends
// with "Done.".
//
// The shapes follow the vendors' API references (Anthropic "Streaming
// Messages", OpenAI "Responses API streaming events") and what the CLIs
// were seen to send and accept (cli/testdata/realcli/README records it). Every
// request is recorded (Requests), and with a Log path appended to it as a
// JSON line.
package modeltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// Request is one request the endpoint received: its method, path with
// query, the headers that name the client (user-agent, anthropic-version,
// anthropic-beta, x-app; never a key), whether it carried a key, and the
// body.
type Request struct {
	TimeMS  int64             `json:"time_ms"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers,omitempty"`
	HasKey  bool              `json:"has_key"`
	Body    json.RawMessage   `json:"body,omitempty"`
	// Answer is what the endpoint made of it: "tool:CMD" (a shell
	// command), "call:NAME" (another tool, as the request named it),
	// "text", "side", "count", "head", "fault:STATUS" (SetFault) or
	// "unknown".
	Answer string `json:"answer"`
	// Keys are the keys it carried, in x-api-key or as the Bearer of
	// Authorization, for a test to compare with the one it signed in
	// with; kept in memory only, never in the log.
	Keys []string `json:"-"`
}

// Server is the endpoint. Its zero value is not usable: use Start.
type Server struct {
	// URL is the base URL, http://127.0.0.1:PORT, to give the CLIs
	// (ANTHROPIC_BASE_URL; codex's model provider base_url is URL+"/v1").
	URL string

	addr string
	srv  *http.Server
	log  string

	mu    sync.Mutex
	lis   net.Listener
	conns map[net.Conn]struct{}
	fault Fault
	reqs  []Request
	seq   int
}

// Start serves the endpoint on a loopback port. log, when not empty, is a
// file each request is appended to as a JSON line.
func Start(log string) (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + lis.Addr().String(), addr: lis.Addr().String(), lis: lis, log: log, conns: map[net.Conn]struct{}{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ConnState: s.trackConn}
	go s.srv.Serve(lis)
	return s, nil
}

// Close stops the endpoint.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns a copy of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *Server) record(r *http.Request, body []byte, answer string) {
	rec := Request{TimeMS: time.Now().UnixMilli(), Method: r.Method, Path: r.URL.RequestURI(), Headers: map[string]string{}, Answer: answer}
	for _, h := range []string{"User-Agent", "Anthropic-Version", "Anthropic-Beta", "X-App", "Originator", "Content-Type"} {
		if v := r.Header.Get(h); v != "" {
			rec.Headers[strings.ToLower(h)] = v
		}
	}
	if k := r.Header.Get("X-Api-Key"); k != "" {
		rec.Keys = append(rec.Keys, k)
	}
	if k, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && k != "" {
		rec.Keys = append(rec.Keys, k)
	}
	rec.HasKey = len(rec.Keys) > 0
	if json.Valid(body) {
		rec.Body = body
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, rec)
	if s.log != "" {
		if b, err := json.Marshal(rec); err == nil {
			if f, err := os.OpenFile(s.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
				f.Write(append(b, '\n'))
				f.Close()
			}
		}
	}
}

func (s *Server) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s_%06d", prefix, s.seq)
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	path := r.URL.Path
	model := r.Method == http.MethodPost && (strings.HasPrefix(path, "/v1/messages") || strings.HasSuffix(path, "/responses"))
	if f := s.currentFault(); f > 0 && model {
		s.record(r, body, "fault:"+f.String())
		s.writeFault(w, r, f)
		return
	}
	switch {
	case r.Method == http.MethodHead || (r.Method == http.MethodGet && path == "/"):
		s.record(r, nil, "head")
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		s.record(r, body, "count")
		writeJSON(w, map[string]any{"input_tokens": 100 + len(body)/4})
	case r.Method == http.MethodPost && path == "/v1/messages":
		s.messages(w, r, body)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/responses"):
		s.responses(w, r, body)
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		s.record(r, nil, "models")
		writeJSON(w, map[string]any{"object": "list", "data": []any{}, "models": []any{}})
	default:
		s.record(r, body, "unknown")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"type":"error","error":{"type":"not_found_error","message":"not served by the scripted endpoint"}}`))
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// turn is what the conversation asks for now: the plan of the latest user
// text and how many of its steps have been called.
type turn struct {
	plan []string
	done int
	// relay is whether the turn's prompt is a request of ours, whose
	// model tells the user what the last command said (its exit 3 or 4
	// findings); last is that command's result.
	relay bool
	last  string
}

// answer is the text that ends the turn: "Done.", and for a request of
// ours the last command's output, as a model relays it to the user.
func (t turn) answer() string {
	if t.relay && strings.TrimSpace(t.last) != "" {
		return "Done. The command said:\n" + strings.TrimSpace(t.last)
	}
	return "Done."
}

// failStep starts a plan step that fails its request ("model: fail
// STATUS"); no shell command starts with a NUL.
const failStep = "\x00fail "

// failAt is the fault that plan step cmd asks for, or NoFault when it is
// a command (or names no status that ParseFault takes).
func failAt(cmd string) Fault {
	st, ok := strings.CutPrefix(cmd, failStep)
	if !ok {
		return NoFault
	}
	f, err := ParseFault(st)
	if err != nil || f <= 0 {
		return NoFault
	}
	return f
}

// next is the command to call next, or "" when the turn is over.
func (t turn) next() string {
	if t.done < len(t.plan) {
		return t.plan[t.done]
	}
	return ""
}

var (
	progressRE = regexp.MustCompile(`cocoonbox-agent offload post --progress < ('[^']*'|\S+)`)
	backPostRE = regexp.MustCompile(`then run: (cocoonbox-agent offload post --back < ('[^']*'|\S+))`)
	backToRE   = regexp.MustCompile(`write your hand-over to (\S+) with every heading`)
)

// planTurn is the turn of a request of n items, as far as its user
// prompts tell: the plan of the last (planOf), and that item's index, or
// a zero turn and -1 when there is none. text(i) is item i's user
// prompts, first to last, none for an item of another role or with no
// text.
func planTurn(n int, text func(i int) []string) (turn, int) {
	var prompts []string
	last := -1
	for i := range n {
		if ps := text(i); len(ps) > 0 {
			prompts = append(prompts, ps...)
			last = i
		}
	}
	if last < 0 {
		return turn{}, -1
	}
	_, relay := requestPlan(prompts[len(prompts)-1], prompts)
	return turn{plan: planOf(prompts[len(prompts)-1], prompts), relay: relay}, last
}

// planOf is the plan of a user text; prompts is every user text of the
// conversation so far, first to last (the first prompt names the
// hand-over path for progress).
func planOf(text string, prompts []string) []string {
	if plan, ok := requestPlan(text, prompts); ok {
		return plan
	}
	var plan []string
	back := strings.HasPrefix(strings.TrimSpace(text), "BACK:")
	if back {
		plan = append(plan, "git add -A && { git diff --cached --quiet || git commit -q -m 'model: work left at BACK'; }")
	}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		rest, ok := strings.CutPrefix(l, "model:")
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		switch {
		case strings.HasPrefix(rest, "bash "):
			plan = append(plan, strings.TrimSpace(rest[len("bash "):]))
		case strings.HasPrefix(rest, "tool "):
			plan = append(plan, toolStepOf(strings.TrimSpace(rest[len("tool "):])))
		case strings.HasPrefix(rest, "fail "):
			st := strings.TrimSpace(rest[len("fail "):])
			if f, err := ParseFault(st); err != nil || f <= 0 {
				// A script's mistake shows in the turn, never as a NUL command.
				plan = append(plan, "echo "+shellquote.Quote("modeltest: bad step: model: fail "+st+" (want an HTTP status 400-599)")+" >&2; exit 97")
				continue
			}
			plan = append(plan, failStep+st)
		case rest == "progress":
			for _, p := range prompts {
				if m := progressRE.FindStringSubmatch(p); m != nil {
					plan = append(plan, writeHandover(m[1], "progress")+" && cocoonbox-agent offload post --progress < "+m[1])
					break
				}
			}
		}
	}
	if back {
		if m := backToRE.FindStringSubmatch(text); m != nil {
			plan = append(plan, writeHandover(shellquote.Quote(m[1]), "brought back"))
		}
		if m := backPostRE.FindStringSubmatch(text); m != nil {
			plan = append(plan, m[1])
		}
	}
	return plan
}

// writeHandover is a shell command writing a complete hand-over to path
// (already quoted for the shell).
func writeHandover(path, state string) string {
	h := "# Hand-over: the scripted task\n"
	for _, s := range []string{"Goal and definition of done", "User preferences and constraints", "Current state", "Decisions made", "Files touched", "Next steps", "Commands", "Environment facts", "Gotchas learned", "Open questions"} {
		h += "## " + s + "\nnone\n"
	}
	h = strings.Replace(h, "## Current state\nnone", "## Current state\n"+state, 1)
	return "printf '%s' " + shellquote.Quote(h) + " > " + path
}

// sse writes server-sent events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes event name with data, whose "type" is name too, as in
// both vendors' streams.
func (e *sse) event(name string, data map[string]any) {
	data["type"] = name
	b, _ := json.Marshal(data)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "event: %s\ndata: %s\n\n", name, b)
	e.w.Write(buf.Bytes())
	if e.f != nil {
		e.f.Flush()
	}
}

// Prompt is the latest user text of a main request (one that offers the
// CLI's shell tool): what the model was asked at that step. It is "" for
// other requests.
func (r Request) Prompt() string {
	if len(r.Body) == 0 {
		return ""
	}
	if strings.HasPrefix(r.Answer, "tool:") || strings.HasPrefix(r.Answer, "call:") || r.Answer == "text" {
		var m messagesRequest
		if strings.HasPrefix(r.Path, "/v1/messages") && json.Unmarshal(r.Body, &m) == nil {
			for i := len(m.Messages) - 1; i >= 0; i-- {
				if m.Messages[i].Role == "user" {
					if t := userText(blocks(m.Messages[i].Content)); t != "" {
						return t
					}
				}
			}
			return ""
		}
		var o responsesRequest
		if json.Unmarshal(r.Body, &o) == nil {
			for i := len(o.Input) - 1; i >= 0; i-- {
				if o.Input[i].Role == "user" {
					if t := inputText(o.Input[i].Content); t != "" {
						return t
					}
				}
			}
		}
	}
	return ""
}
