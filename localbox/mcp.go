package localbox

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cocoonbox/cocoonbox/internal/cork"
	"github.com/cocoonbox/cocoonbox/internal/version"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// The control MCP (seeds/001 "Control MCP"; docs/protocol.md): the
// lifecycle of the caller's boxes as MCP tools over streamable HTTP at
// ControlMCPPath, with the account's bearer token.

// ControlMCPPath is the path of the control MCP on the local box's
// address (its unix socket too).
const ControlMCPPath = "/cocoonbox.mcp/control"

// boxArg is the optional box argument of every tool but box_list,
// box_create and usage.
const boxArg = `{"type":"string","description":"The box's name or id; without it, your first box."}`

// A controlTool is one tool: its contract (name, description, schemas)
// and what it does. run returns the structured result, or an error: a
// toolError (isError), a *jsonrpc.Error, or any other (-32603).
type controlTool struct {
	name, description   string
	input, output       string
	run                 func(ctx context.Context, t *toolCall) (any, error)
	inputSchema         *jsonschema.Resolved
	inputRaw, outputRaw json.RawMessage
}

// toolCall is one call of a tool: the caller's account, its arguments
// (defaults applied), and where its progress goes.
type toolCall struct {
	s       *Server
	account string
	args    map[string]any
	req     *mcp.CallToolRequest
	// progress is the caller's progress token; nil sends no notifications.
	progress any
	lastPct  float64
	// sent counts the notifications sent.
	sent int
}

// toolError is a tool that ran but could not do what was asked: a result
// with isError and its one line.
type toolError struct{ msg string }

func (e toolError) Error() string { return e.msg }

func toolErrorf(format string, args ...any) error { return toolError{fmt.Sprintf(format, args...)} }

func (t *toolCall) str(k string) string { v, _ := t.args[k].(string); return v }

func (t *toolCall) flag(k string) bool { v, _ := t.args[k].(bool); return v }

// box finds the box the call names, or the account's first.
func (t *toolCall) box() (*box, error) {
	ref := t.str("box")
	if ref == "" {
		bs := t.s.oldestFirst(t.account)
		if len(bs) == 0 {
			return nil, toolErrorf("you have no box yet: make one with box_create or box_ensure")
		}
		return bs[0], nil
	}
	if b, ok := t.s.reg.get(t.account, ref); ok {
		return b, nil
	}
	return nil, toolErrorf("no box %q: list yours with box_list", ref)
}

// emit sends one notifications/progress per operation event, when the
// caller sent a progress token and the tool waits.
func (t *toolCall) emit(ctx context.Context) emitFunc {
	return func(ev *controlv1.OperationEvent) error {
		if t.progress == nil {
			return nil
		}
		phase := strings.ToLower(strings.TrimPrefix(ev.GetPhase().String(), "PHASE_"))
		pct := max(float64(ev.GetProgress()), t.lastPct)
		t.lastPct = pct
		msg := phase
		if ev.GetTotalBytes() > 0 {
			msg = fmt.Sprintf("%s: %d of %d bytes", phase, ev.GetDoneBytes(), ev.GetTotalBytes())
		}
		if ev.GetError() != "" {
			msg = phase + ": " + ev.GetError()
		}
		meta := mcp.Meta{"operation_id": ev.GetOperationId(), "phase": phase, "box_id": ev.GetBox().GetBoxId(),
			"state": stateWord(ev.GetBox().GetState())}
		if ev.GetTotalBytes() > 0 {
			meta["done_bytes"], meta["total_bytes"] = ev.GetDoneBytes(), ev.GetTotalBytes()
		}
		// A lost notification loses nothing the result does not carry.
		t.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{Meta: meta, ProgressToken: t.progress,
			Progress: pct, Total: 100, Message: msg})
		t.sent++
		return nil
	}
}

// stateWord is a state as the contract spells it: "running", "hibernated".
func stateWord(s controlv1.BoxState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "BOX_STATE_"))
}

// last keeps an operation's last event and passes each on to next.
func last(next emitFunc) (emitFunc, func() *controlv1.OperationEvent) {
	var ev *controlv1.OperationEvent
	return func(e *controlv1.OperationEvent) error { ev = e; return next(e) }, func() *controlv1.OperationEvent { return ev }
}

// outcome turns an operation's last event into the tool's error, if any.
func outcome(ev *controlv1.OperationEvent) error {
	if ev == nil {
		return errors.New("the operation ended without a result")
	}
	if ev.GetOutcome() == controlv1.Outcome_OUTCOME_FAILED {
		return toolErrorf("%s", ev.GetError())
	}
	return nil
}

// oldestFirst is account's boxes, the oldest first (then by name).
func (s *Server) oldestFirst(account string) []*box {
	bs := s.reg.list(account)
	slices.SortStableFunc(bs, func(a, b *box) int {
		a.mu.Lock()
		x := a.CreatedAtMS
		a.mu.Unlock()
		b.mu.Lock()
		y := b.CreatedAtMS
		b.mu.Unlock()
		return cmp.Compare(x, y)
	})
	return bs
}

var controlTools = []*controlTool{
	{
		name: "box_list",
		description: "List your cocoonbox boxes (remote Linux machines), oldest first, with each box's id, name, state " +
			"(absent, starting, running, hibernating, hibernated or failed), image and when it was last saved. " +
			"Reading the list never wakes a box.",
		input: `{"type":"object","properties":{}}`,
		output: `{"type":"object","properties":{"boxes":{"type":"array","items":{"type":"object","properties":{` +
			`"box_id":{"type":"string"},"name":{"type":"string"},"state":{"type":"string"},"image":{"type":"string"},` +
			`"last_saved_at_ms":{"type":"integer"}},"required":["box_id","name","state","image","last_saved_at_ms"]}}},"required":["boxes"]}`,
		run: func(_ context.Context, t *toolCall) (any, error) {
			out := []map[string]any{}
			for _, b := range t.s.oldestFirst(t.account) {
				p := b.proto()
				out = append(out, map[string]any{"box_id": p.GetBoxId(), "name": p.GetName(), "state": stateWord(p.GetState()),
					"image": p.GetImage(), "last_saved_at_ms": p.GetLastSavedAtMs()})
			}
			return map[string]any{"boxes": out}, nil
		},
	},
	{
		name: "box_status",
		description: "Show one box's status: its state, the image it runs, the latest image and whether an upgrade is " +
			"available, and when it was last saved. Reading the status never wakes a hibernated box. " +
			"Without a box it reports your first box; with no box at all, state is \"absent\".",
		input: `{"type":"object","properties":{"box":` + boxArg + `}}`,
		output: `{"type":"object","properties":{"box_id":{"type":"string"},"name":{"type":"string"},"state":{"type":"string"},` +
			`"image":{"type":"string"},"latest_image":{"type":"string"},"upgrade_available":{"type":"boolean"},` +
			`"last_saved_at_ms":{"type":"integer"}},"required":["box_id","name","state","image","latest_image","upgrade_available","last_saved_at_ms"]}`,
		run: func(ctx context.Context, t *toolCall) (any, error) {
			t.s.refreshImages(ctx)
			if t.str("box") == "" && len(t.s.reg.list(t.account)) == 0 {
				return map[string]any{"box_id": "", "name": "", "state": "absent", "image": "", "latest_image": t.s.reg.images.latestImage(),
					"upgrade_available": false, "last_saved_at_ms": 0}, nil
			}
			b, err := t.box()
			if err != nil {
				return nil, err
			}
			p := b.proto()
			return map[string]any{"box_id": p.GetBoxId(), "name": p.GetName(), "state": stateWord(p.GetState()), "image": p.GetImage(),
				"latest_image": p.GetLatestImage(), "upgrade_available": p.GetUpgradeAvailable(), "last_saved_at_ms": p.GetLastSavedAtMs()}, nil
		},
	},
	{
		name: "box_ensure",
		description: "Make sure a box is running: wake it if it is hibernated, start it if it is stopped, and create " +
			"your first box (\"main\") if you have none. operation_id is \"\" when the box was already running. " +
			"With wait (the default) the result comes when the box is running.",
		input:  `{"type":"object","properties":{"box":` + boxArg + `,"wait":{"type":"boolean","default":true,"description":"Wait until the box is running."}}}`,
		output: `{"type":"object","properties":{"box_id":{"type":"string"},"state":{"type":"string"},"operation_id":{"type":"string"}},"required":["box_id","state","operation_id"]}`,
		run: func(ctx context.Context, t *toolCall) (any, error) {
			if t.str("box") == "" && len(t.s.reg.list(t.account)) == 0 {
				b, op, err := t.s.createBox(t.account, DefaultBox, "", t.emit(ctx))
				if err != nil {
					return nil, err
				}
				return map[string]any{"box_id": b.ID, "state": stateWord(b.proto().GetState()), "operation_id": op}, nil
			}
			b, err := t.box()
			if err != nil {
				return nil, err
			}
			emit, end := last(t.emit(ctx))
			t.s.ensureBox(b, emit)
			if err := outcome(end()); err != nil {
				return nil, err
			}
			return map[string]any{"box_id": b.ID, "state": stateWord(end().GetBox().GetState()), "operation_id": end().GetOperationId()}, nil
		},
	},
	{
		name: "box_create",
		description: "Create a new box with the given name (1 to 63 of a-z, 0-9 and -, not starting with -), on the " +
			"given image or the latest one. With wait (the default) the result comes when the box is running.",
		input: `{"type":"object","properties":{"name":{"type":"string","description":"The new box's name."},` +
			`"image":{"type":"string","description":"The image to run; without it, the latest."},` +
			`"wait":{"type":"boolean","default":true,"description":"Wait until the box is running."}},"required":["name"]}`,
		output: `{"type":"object","properties":{"box_id":{"type":"string"},"name":{"type":"string"},"state":{"type":"string"},"operation_id":{"type":"string"}},"required":["box_id","name","state","operation_id"]}`,
		run: func(ctx context.Context, t *toolCall) (any, error) {
			b, op, err := t.s.createBox(t.account, t.str("name"), t.str("image"), t.emit(ctx))
			if err != nil {
				return nil, err
			}
			return map[string]any{"box_id": b.ID, "name": b.Name, "state": stateWord(b.proto().GetState()), "operation_id": op}, nil
		},
	},
	{
		name: "box_hibernate",
		description: "Hibernate a box: save it and stop it, so it costs nothing while asleep; the next use wakes it. " +
			"Commands running in it stop, and an agent session working in it is paused. The result comes when it is done.",
		input:  `{"type":"object","properties":{"box":` + boxArg + `}}`,
		output: `{"type":"object","properties":{"box_id":{"type":"string"},"state":{"type":"string"},"operation_id":{"type":"string"}},"required":["box_id","state","operation_id"]}`,
		run: func(ctx context.Context, t *toolCall) (any, error) {
			b, err := t.box()
			if err != nil {
				return nil, err
			}
			emit, end := last(t.emit(ctx))
			t.s.hibernateBox(b, emit)
			if err := outcome(end()); err != nil {
				return nil, err
			}
			return map[string]any{"box_id": b.ID, "state": stateWord(end().GetBox().GetState()), "operation_id": end().GetOperationId()}, nil
		},
	},
	{
		name: "box_save",
		description: "Save a box now; a running box keeps running. The result says when it was saved and how many " +
			"bytes the save holds. A hibernated box was saved when it went to sleep and is not woken.",
		input:  `{"type":"object","properties":{"box":` + boxArg + `}}`,
		output: `{"type":"object","properties":{"box_id":{"type":"string"},"last_saved_at_ms":{"type":"integer"},"operation_id":{"type":"string"},"bytes":{"type":"integer"}},"required":["box_id","last_saved_at_ms","operation_id","bytes"]}`,
		run: func(ctx context.Context, t *toolCall) (any, error) {
			b, err := t.box()
			if err != nil {
				return nil, err
			}
			var bytes int64
			emit, end := last(t.emit(ctx))
			t.s.saveBox(b, func(ev *controlv1.OperationEvent) error {
				if ev.GetPhase() == controlv1.Phase_PHASE_SAVING || ev.GetOutcome() == controlv1.Outcome_OUTCOME_DONE {
					bytes = ev.GetTotalBytes()
				}
				return emit(ev)
			})
			if err := outcome(end()); err != nil {
				return nil, err
			}
			return map[string]any{"box_id": b.ID, "last_saved_at_ms": end().GetBox().GetLastSavedAtMs(), "operation_id": end().GetOperationId(), "bytes": bytes}, nil
		},
	},
	{
		name: "box_upgrade",
		description: "Upgrade a box to the latest image (box_status says whether one is available). Its home and " +
			"workspace are kept, but everything running in it restarts, an agent session working in it included: " +
			"ask the user first, then call with confirm true. The result comes when it is done.",
		input:  `{"type":"object","properties":{"box":` + boxArg + `,"confirm":{"type":"boolean","description":"true: the user agreed that what runs in the box restarts."}},"required":["confirm"]}`,
		output: `{"type":"object","properties":{"box_id":{"type":"string"},"state":{"type":"string"},"image":{"type":"string"},"operation_id":{"type":"string"}},"required":["box_id","state","image","operation_id"]}`,
		run: func(ctx context.Context, t *toolCall) (any, error) {
			b, err := t.box()
			if err != nil {
				return nil, err
			}
			if !t.flag("confirm") {
				return nil, toolErrorf("upgrading box %s restarts everything running in it: ask the user, then call box_upgrade with confirm true", b.Name)
			}
			emit, end := last(t.emit(ctx))
			t.s.upgradeBox(b, emit)
			if err := outcome(end()); err != nil {
				return nil, err
			}
			p := end().GetBox()
			return map[string]any{"box_id": b.ID, "state": stateWord(p.GetState()), "image": p.GetImage(), "operation_id": end().GetOperationId()}, nil
		},
	},
	{
		name: "box_delete",
		description: "Delete a box and everything in it, for good: its home, its workspace and what runs in it. " +
			"Name the box; ask the user first, then call with confirm true. The result comes when it is done.",
		input: `{"type":"object","properties":{"box":{"type":"string","description":"The box's name or id."},` +
			`"confirm":{"type":"boolean","description":"true: the user agreed that the box and its files are deleted for good."}},"required":["box","confirm"]}`,
		output: `{"type":"object","properties":{"box_id":{"type":"string"},"operation_id":{"type":"string"}},"required":["box_id","operation_id"]}`,
		run: func(ctx context.Context, t *toolCall) (any, error) {
			b, err := t.box()
			if err != nil {
				return nil, err
			}
			if !t.flag("confirm") {
				return nil, toolErrorf("deleting box %s removes its home and workspace for good: ask the user, then call box_delete with confirm true", b.Name)
			}
			emit, end := last(t.emit(ctx))
			t.s.deleteBoxOp(b, emit)
			if err := outcome(end()); err != nil {
				return nil, err
			}
			return map[string]any{"box_id": b.ID, "operation_id": end().GetOperationId()}, nil
		},
	},
	{
		name: "usage",
		description: "Show your account's model usage: what model calls cost today and this month, the daily cap " +
			"and what it leaves for today, in micro-units (1000000 is one dollar). unmeasured names the fields " +
			"this server cannot measure, which read 0.",
		input: `{"type":"object","properties":{}}`,
		output: `{"type":"object","properties":{"today":{"type":"integer"},"month":{"type":"integer"},"daily_cap_micros":{"type":"integer"},` +
			`"default_cap":{"type":"boolean"},"remaining_today_micros":{"type":"integer"},"unmeasured":{"type":"array","items":{"type":"string"}}},` +
			`"required":["today","month","daily_cap_micros","default_cap","remaining_today_micros"]}`,
		run: func(_ context.Context, t *toolCall) (any, error) {
			u := t.s.usage()
			return map[string]any{"today": u.GetToday(), "month": u.GetMonth(), "daily_cap_micros": u.GetDailyCapMicros(),
				"default_cap": u.GetDefaultCap(), "remaining_today_micros": u.GetRemainingTodayMicros(), "unmeasured": u.GetUnmeasured()}, nil
		},
	},
}

// resolveTools makes each tool's schemas: once, when the first control
// MCP is made, not at every start of a binary that links this package.
var resolveTools = sync.OnceFunc(func() {
	for _, t := range controlTools {
		// No argument beyond the contract's: a misspelled one ("name" for
		// "box") is -32602, not a call on the first box.
		var m map[string]any
		if err := json.Unmarshal([]byte(t.input), &m); err != nil {
			panic(t.name + ": " + err.Error())
		}
		m["additionalProperties"] = false
		in, err := json.Marshal(m)
		if err != nil {
			panic(t.name + ": " + err.Error())
		}
		t.input = string(in)
		var sch jsonschema.Schema
		if err := json.Unmarshal([]byte(t.input), &sch); err != nil {
			panic(t.name + ": " + err.Error())
		}
		rs, err := sch.Resolve(nil)
		if err != nil {
			panic(t.name + ": " + err.Error())
		}
		t.inputSchema, t.inputRaw, t.outputRaw = rs, json.RawMessage(t.input), json.RawMessage(t.output)
	}
})

// ControlTools are the names of the control MCP's tools, in the
// contract's order.
func ControlTools() []string {
	var out []string
	for _, t := range controlTools {
		out = append(out, t.name)
	}
	return out
}

// recordInfo carries the caller's token record in the MCP's TokenInfo.
const recordInfo = "cocoonbox/record"

// controlMCP is the control MCP's server: one for every session.
func (s *Server) controlMCP() *mcp.Server {
	resolveTools()
	srv := mcp.NewServer(&mcp.Implementation{Name: "cocoonbox-localbox", Title: "cocoonbox local box", Version: version.String()},
		&mcp.ServerOptions{Instructions: "Tools for the lifecycle of the user's cocoonbox boxes: list, status, ensure, create, hibernate, save, upgrade, delete, and the account's usage."})
	for _, t := range controlTools {
		srv.AddTool(&mcp.Tool{Name: t.name, Description: t.description, InputSchema: t.inputRaw, OutputSchema: t.outputRaw,
			Annotations: annotations(t.name)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return s.callTool(ctx, t, req)
			})
	}
	return srv
}

// annotations are the hints of the tool name (MCP's ToolAnnotations):
// box_list, box_status and usage only read; box_delete and box_upgrade
// destroy what the box held or ran; none reaches beyond the caller's
// boxes. Agents decide on them which calls to ask the user about: Codex
// 0.171 asks before a call of box_delete or box_upgrade, and runs the
// others (without annotations it asked before every call).
func annotations(name string) *mcp.ToolAnnotations {
	no, yes := false, true
	a := &mcp.ToolAnnotations{OpenWorldHint: &no}
	switch name {
	case "box_list", "box_status", "usage":
		a.ReadOnlyHint = true
	case "box_delete", "box_upgrade":
		a.DestructiveHint = &yes
	default:
		a.DestructiveHint = &no
		a.IdempotentHint = name != "box_create"
	}
	return a
}

// callTool checks the arguments (-32602 when they do not match the input
// schema), runs t, and shapes its answer as the contract says: the
// structured result with one JSON text block, or isError with one text
// block, or -32603.
func (s *Server) callTool(ctx context.Context, t *controlTool, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var rec TokenRecord
	if ti := req.Extra.TokenInfo; ti != nil {
		rec, _ = ti.Extra[recordInfo].(TokenRecord)
	}
	args := map[string]any{}
	if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: the arguments are not a JSON object: %v", t.name, err)}
		}
	}
	if err := t.inputSchema.ApplyDefaults(&args); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	if err := t.inputSchema.Validate(args); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: the arguments do not match its input schema: %v", t.name, err)}
	}
	call := &toolCall{s: s, account: rec.Account, args: args, req: req}
	wait, hasWait := args["wait"].(bool)
	if !hasWait || wait {
		call.progress = req.Params.GetProgressToken()
	}
	out, err := t.run(ctx, call)
	if call.sent > 0 {
		s.logf("control MCP %s: %d progress notifications sent to the caller", t.name, call.sent)
	}
	if err != nil {
		if msg, ok := toolMessage(err); ok {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
		}
		if je, ok := errors.AsType[*jsonrpc.Error](err); ok {
			return nil, je
		}
		s.logf("control MCP %s: %v", t.name, err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s: %v", t.name, err)}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(data), Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}, nil
}

// toolMessage is the isError text of err: a toolError's, or a gRPC
// status of a refusal (a bad name, a name taken, a box not found).
func toolMessage(err error) (string, bool) {
	if te, ok := errors.AsType[toolError](err); ok {
		return te.msg, true
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.InvalidArgument, codes.AlreadyExists, codes.NotFound, codes.FailedPrecondition, codes.ResourceExhausted:
			return st.Message(), true
		}
	}
	return "", false
}

// mcpHandler serves the control MCP: the bearer token checked on every
// request as gRPC checks it, a valid one taking the connection out of the
// anonymous gate.
func (s *Server) mcpHandler() http.Handler {
	srv := s.controlMCP()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{})
	verify := func(_ context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		rec, ok := s.toks.check(token)
		if !ok {
			return nil, fmt.Errorf("%w: sign in with `cocoonbox login`", auth.ErrInvalidToken)
		}
		if rec.Account != "" {
			if _, ok := s.accts.get(rec.Account); !ok {
				return nil, auth.ErrInvalidToken
			}
			if err := s.openAccount(rec.Account); err != nil {
				return nil, fmt.Errorf("the boxes of account %s cannot be served: %v", rec.Account, err)
			}
		}
		if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			if a := anonOf(c); a != nil {
				a.authenticated()
			}
		}
		return &auth.TokenInfo{UserID: rec.ID, Extra: map[string]any{recordInfo: rec}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(unknownMethods(h))
}

// mcpMethods are the methods a client may call on an MCP server (the
// specification's client requests); the SDK answers those it does not
// serve with -32601 itself.
var mcpMethods = []string{"initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get",
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
	"completion/complete", "logging/setLevel"}

// unknownMethods answers a request for a method no MCP server has with
// JSON-RPC's -32601, as the contract says, where the SDK's transport
// answers HTTP 400 before any handler sees it (before protocol version
// 2026-07-28).
func unknownMethods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxMCPBody+1))
		r.Body.Close()
		if err != nil || len(body) > maxMCPBody {
			http.Error(w, "the request is too large or cut short", http.StatusRequestEntityTooLarge)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &req) == nil && len(req.ID) > 0 && string(req.ID) != "null" && req.Method != "" &&
			!strings.HasPrefix(req.Method, "notifications/") && !slices.Contains(mcpMethods, req.Method) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID,
				"error": map[string]any{"code": jsonrpc.CodeMethodNotFound, "message": fmt.Sprintf("method %q not found", req.Method)}})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// maxMCPBody bounds one request to the control MCP, in bytes: its
// largest call is a few hundred.
const maxMCPBody = 64 << 10

// connKey carries an HTTP request's connection in its context
// (http.Server.ConnContext).
type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// anonOf finds the gate's anonConn under c, or nil (a unix socket's).
func anonOf(c net.Conn) *anonConn {
	for c != nil {
		switch x := c.(type) {
		case *anonConn:
			return x
		case *prefixConn:
			c = x.Conn
		case *tls.Conn:
			c = x.NetConn()
		case *cork.Conn:
			c = x.Conn
		case *cork.RawConn:
			c = x.Conn
		case *gateConn:
			return x.a
		default:
			return nil
		}
	}
	return nil
}
