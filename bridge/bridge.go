// Package bridge is the MCP server `cocoonbox mcp` runs on a local agent's
// stdio: it forwards the endpoint's control MCP (its tools, results,
// errors and progress, unchanged) and serves tools of ours beside them.
package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is a tool of ours, served beside the control MCP's.
type Tool struct {
	Tool    *mcp.Tool
	Handler mcp.ToolHandler
}

// Options says what the bridge reaches and serves.
type Options struct {
	// URL and HTTPClient reach the control MCP; the client adds the token.
	URL        string
	HTTPClient *http.Client
	// Version is the bridge's version, as its implementation reports it.
	Version string
	// Ours are the tools of ours; a name the control MCP has too is the
	// control MCP's.
	Ours []Tool
	// FinalWait is how long a forwarded call that ran an operation waits
	// after its result for the operation's last progress notification
	// (the SDK's client hands notifications to their handler apart from
	// results, so the last one may be handled just after the result it
	// came before); 0 means 2 s.
	FinalWait time.Duration
}

// Bridge forwards one agent's calls to the control MCP.
type Bridge struct {
	o      Options
	remote *mcp.ClientSession
	server *mcp.Server

	mu       sync.Mutex
	next     int
	progress map[string]*relay // by the token the bridge sent
}

// relay is one forwarded call's progress: where its notifications go.
type relay struct {
	session *mcp.ServerSession
	token   any
	final   chan struct{}
	once    sync.Once
}

// New connects to the control MCP and lists its tools. The error says
// why the control MCP cannot be reached or refused the token.
func New(ctx context.Context, o Options) (*Bridge, error) {
	b := &Bridge{o: o, progress: map[string]*relay{}}
	c := mcp.NewClient(&mcp.Implementation{Name: "cocoonbox-mcp", Version: o.Version},
		&mcp.ClientOptions{ProgressNotificationHandler: b.relayProgress})
	var err error
	b.remote, err = c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: o.URL, HTTPClient: o.HTTPClient,
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return nil, fmt.Errorf("the control MCP at %s: %w", o.URL, err)
	}
	b.server = mcp.NewServer(&mcp.Implementation{Name: "cocoonbox", Title: "cocoonbox", Version: o.Version},
		&mcp.ServerOptions{Instructions: "Tools for the user's cocoonbox boxes (remote Linux machines): the box_* tools " +
			"and usage are the service's control MCP; the tools named cocoonbox_* are the cocoonbox CLI's own, for the " +
			"coding-agent sessions offloaded to a box."})
	remote := map[string]bool{}
	for tl, err := range b.remote.Tools(ctx, nil) {
		if err != nil {
			b.remote.Close()
			return nil, fmt.Errorf("list the control MCP's tools: %w", err)
		}
		remote[tl.Name] = true
		b.server.AddTool(tl, b.forward)
	}
	for _, t := range o.Ours {
		if !remote[t.Tool.Name] {
			b.server.AddTool(t.Tool, t.Handler)
		}
	}
	return b, nil
}

// Run serves the agent on t until it goes, then closes the connection to
// the control MCP.
func (b *Bridge) Run(ctx context.Context, t mcp.Transport) error {
	defer b.remote.Close()
	return b.server.Run(ctx, t)
}

// forward calls the same tool of the control MCP with the same arguments
// and hands back its result or its JSON-RPC error; with a progress token,
// the control MCP's notifications come back under the agent's token.
func (b *Bridge) forward(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments}
	var r *relay
	if tok := req.Params.GetProgressToken(); tok != nil {
		b.mu.Lock()
		b.next++
		id := "cocoonbox-" + strconv.Itoa(b.next)
		r = &relay{session: req.Session, token: tok, final: make(chan struct{})}
		b.progress[id] = r
		b.mu.Unlock()
		p.SetProgressToken(id)
		defer func() {
			b.mu.Lock()
			delete(b.progress, id)
			b.mu.Unlock()
		}()
	}
	res, err := b.remote.CallTool(ctx, p)
	if err != nil {
		if je, ok := errors.AsType[*jsonrpc.Error](err); ok {
			return nil, je
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the control MCP at %s: %v", b.o.URL, err)}
	}
	// A call that ran no operation (box_list, box_status, a box_ensure of
	// a running box) has no last notification to wait for.
	if r != nil && !res.IsError && ranOperation(res) {
		wait := b.o.FinalWait
		if wait <= 0 {
			wait = 2 * time.Second
		}
		select {
		case <-r.final:
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	return res, nil
}

// ranOperation reports whether a control MCP result names an operation:
// its structuredContent has an operation_id that is not empty.
func ranOperation(res *mcp.CallToolResult) bool {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return false
	}
	var out struct {
		OperationID string `json:"operation_id"`
	}
	return json.Unmarshal(b, &out) == nil && out.OperationID != ""
}

// relayProgress passes a control MCP notification on to the agent that
// made the call, under its own token.
func (b *Bridge) relayProgress(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	id, _ := req.Params.ProgressToken.(string)
	b.mu.Lock()
	r := b.progress[id]
	b.mu.Unlock()
	if r == nil {
		return
	}
	p := *req.Params
	p.ProgressToken = r.token
	r.session.NotifyProgress(ctx, &p)
	if ph, _ := p.Meta["phase"].(string); ph == "done" || ph == "failed" {
		r.once.Do(func() { close(r.final) })
	}
}
