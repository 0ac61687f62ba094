package localbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// bearerRT adds the token to every request.
type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the Go SDK's client to the control MCP at base;
// progress notifications go to progress.
func mcpSession(t *testing.T, base, tok string, progress func(*mcp.ProgressNotificationParams)) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if progress != nil {
				progress(r.Params)
			}
		},
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + localbox.ControlMCPPath,
		HTTPClient: &http.Client{Transport: bearerRT{tok}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callOK calls a tool and checks the contract's success shape: no
// isError, structuredContent matching the tool's outputSchema, and one
// text block holding the same object as JSON. It returns the object.
func callOK(t *testing.T, cs *mcp.ClientSession, tools map[string]*mcp.Tool, name string, args map[string]any, token any) map[string]any {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	r, err := cs.CallTool(t.Context(), p)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if r.IsError || len(r.Content) != 1 {
		t.Fatalf("%s %v: isError %v, content %d blocks: %s", name, args, r.IsError, len(r.Content), text(r))
	}
	var fromText, structured map[string]any
	if err := json.Unmarshal([]byte(text(r)), &fromText); err != nil {
		t.Fatalf("%s: the text block is not JSON: %v", name, err)
	}
	data, _ := json.Marshal(r.StructuredContent)
	json.Unmarshal(data, &structured)
	if !jsonEqual(fromText, structured) {
		t.Fatalf("%s: text %s, structuredContent %s", name, text(r), data)
	}
	checkSchema(t, name+" output", tools[name].OutputSchema, structured)
	return structured
}

func checkSchema(t *testing.T, what string, schema any, v any) {
	t.Helper()
	data, _ := json.Marshal(schema)
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: schema: %v", what, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: schema: %v", what, err)
	}
	if err := rs.Validate(v); err != nil {
		t.Fatalf("%s: %v does not match: %v", what, v, err)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// callIsError calls a tool and checks the contract's refusal shape:
// isError, one text block, no structuredContent. It returns the text.
func callIsError(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v, want an isError result", name, args, err)
	}
	if !r.IsError || len(r.Content) != 1 || r.StructuredContent != nil {
		t.Fatalf("%s %v: isError %v, %d blocks, structured %v", name, args, r.IsError, len(r.Content), r.StructuredContent)
	}
	return text(r)
}

// callCode calls a tool and returns the JSON-RPC error's code.
func callCode(t *testing.T, cs *mcp.ClientSession, name string, args any) int64 {
	t.Helper()
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("%s %v: %v, want a JSON-RPC error", name, args, err)
	}
	return je.Code
}

// The control MCP as the contract states it, driven by the Go SDK's
// client: the nine tools and their input schemas; each success is
// structuredContent matching the outputSchema plus one JSON text block;
// refusals are isError; bad arguments and an unknown tool -32602, an
// unknown method -32601; one notifications/progress per operation event
// with a progress token and none without; the first-box default; reads
// never wake a box; no token, no MCP.
func TestControlMCP(t *testing.T) {
	_, base, tok := newServer(t, nil)
	// The client hands notifications to its handler on a goroutine of
	// their own: one may come after the call's result, never before the
	// call. take waits for the next n.
	events := make(chan *mcp.ProgressNotificationParams, 100)
	cs := mcpSession(t, base, tok, func(p *mcp.ProgressNotificationParams) { events <- p })
	take := func(n int) []*mcp.ProgressNotificationParams {
		var got []*mcp.ProgressNotificationParams
		for range n {
			select {
			case p := <-events:
				got = append(got, p)
			case <-t.Context().Done():
			}
		}
		return got
	}
	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	var names []string
	for _, tl := range lt.Tools {
		tools[tl.Name] = tl
		names = append(names, tl.Name)
		if tl.Description == "" || tl.OutputSchema == nil {
			t.Errorf("%s: description %q, outputSchema %v", tl.Name, tl.Description, tl.OutputSchema)
		}
	}
	want := []string{"box_list", "box_status", "box_ensure", "box_create", "box_hibernate", "box_save", "box_upgrade", "box_delete", "usage"}
	slices.Sort(names)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(names, sorted) {
		t.Fatalf("tools = %v, want %v", names, sorted)
	}
	required := func(name string) []string {
		data, _ := json.Marshal(tools[name].InputSchema)
		var s struct{ Required []string }
		json.Unmarshal(data, &s)
		return s.Required
	}
	for name, req := range map[string][]string{"box_create": {"name"}, "box_upgrade": {"confirm"}, "box_delete": {"box", "confirm"}, "box_status": nil, "box_list": nil} {
		if !slices.Equal(required(name), req) {
			t.Errorf("%s required = %v, want %v", name, required(name), req)
		}
	}

	list := callOK(t, cs, tools, "box_list", nil, nil)
	boxes := list["boxes"].([]any)
	if len(boxes) != 1 || boxes[0].(map[string]any)["name"] != "main" || boxes[0].(map[string]any)["state"] != "running" {
		t.Fatalf("box_list = %v", list)
	}
	// The first-box default: status without a box is main's.
	st := callOK(t, cs, tools, "box_status", map[string]any{}, nil)
	if st["name"] != "main" || st["upgrade_available"] != false || st["image"] != localbox.LatestImage {
		t.Fatalf("box_status = %v", st)
	}

	// box_create with a progress token: one notification per event,
	// progress rising, the result after the last.
	created := callOK(t, cs, tools, "box_create", map[string]any{"name": "work", "image": localbox.Images[0]}, "p1")
	if created["name"] != "work" || created["state"] != "running" || !strings.HasPrefix(created["operation_id"].(string), "op_") {
		t.Fatalf("box_create = %v", created)
	}
	got := take(2)
	if len(got) != 2 || got[0].Message != "creating" || got[1].Message != "done" || got[0].ProgressToken != "p1" || got[1].Progress <= got[0].Progress {
		t.Fatalf("box_create progress = %+v", got)
	}

	// Without a token: no notifications.
	if r := callOK(t, cs, tools, "box_save", map[string]any{"box": "work"}, nil); r["bytes"].(float64) <= 0 || r["last_saved_at_ms"].(float64) == 0 {
		t.Fatalf("box_save = %v", r)
	}
	// Hibernate with progress, then reads leave it asleep.
	if r := callOK(t, cs, tools, "box_hibernate", map[string]any{"box": "work"}, 7); r["state"] != "hibernated" {
		t.Fatalf("box_hibernate = %v", r)
	}
	for range 2 {
		if r := callOK(t, cs, tools, "box_status", map[string]any{"box": "work"}, nil); r["state"] != "hibernated" || r["upgrade_available"] != true {
			t.Fatalf("box_status of a hibernated box = %v", r)
		}
		callOK(t, cs, tools, "box_list", nil, nil)
	}
	got = take(2)
	if len(got) != 2 || got[0].Message != "snapshotting" || got[0].ProgressToken != float64(7) || got[1].Message != "done" {
		t.Fatalf("box_hibernate progress = %+v (want snapshotting, done; none for the calls without a token)", got)
	}
	if r := callOK(t, cs, tools, "box_ensure", map[string]any{"box": "work"}, nil); r["state"] != "running" || r["operation_id"] == "" {
		t.Fatalf("box_ensure = %v", r)
	}
	if r := callOK(t, cs, tools, "box_ensure", map[string]any{"box": "work", "wait": true}, nil); r["operation_id"] != "" {
		t.Fatalf("box_ensure of a running box = %v", r)
	}

	// Refusals: isError with one line, nothing changed.
	if msg := callIsError(t, cs, "box_upgrade", map[string]any{"box": "work", "confirm": false}); !strings.Contains(msg, "confirm") {
		t.Errorf("box_upgrade without confirm: %q", msg)
	}
	if msg := callIsError(t, cs, "box_delete", map[string]any{"box": "work", "confirm": false}); !strings.Contains(msg, "confirm") {
		t.Errorf("box_delete without confirm: %q", msg)
	}
	if msg := callIsError(t, cs, "box_status", map[string]any{"box": "nope"}); !strings.Contains(msg, `"nope"`) {
		t.Errorf("box_status of no box: %q", msg)
	}
	callIsError(t, cs, "box_create", map[string]any{"name": "work"})
	callIsError(t, cs, "box_create", map[string]any{"name": "Bad_Name"})
	callIsError(t, cs, "box_create", map[string]any{"name": "x", "image": "ubuntu"})

	up := callOK(t, cs, tools, "box_upgrade", map[string]any{"box": "work", "confirm": true}, nil)
	if up["image"] != localbox.LatestImage || up["operation_id"] == "" {
		t.Fatalf("box_upgrade = %v", up)
	}
	u := callOK(t, cs, tools, "usage", nil, nil)
	if !slices.Contains(u["unmeasured"].([]any), "today") {
		t.Fatalf("usage = %v", u)
	}

	// Protocol problems.
	for _, c := range []struct {
		name string
		args any
	}{
		{"box_create", map[string]any{}},                        // name is required
		{"box_create", map[string]any{"name": 5}},               // not a string
		{"box_delete", map[string]any{"box": "work"}},           // confirm is required
		{"box_upgrade", map[string]any{"confirm": "yes"}},       // not a boolean
		{"box_ensure", map[string]any{"wait": "no"}},            // not a boolean
		{"no_such_tool", map[string]any{}},                      // unknown tool
		{"box_status", map[string]any{"box": []string{"main"}}}, // not a string
		{"box_status", map[string]any{"name": "ghost"}},         // no such argument
		{"box_hibernate", map[string]any{"bx": "work"}},         // a misspelled box
	} {
		if code := callCode(t, cs, c.name, c.args); code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s %v: code %d, want -32602", c.name, c.args, code)
		}
	}
	if code := rawCall(t, base, tok, "boxes/nope"); code != jsonrpc.CodeMethodNotFound {
		t.Errorf("unknown method: code %d, want -32601", code)
	}

	del := callOK(t, cs, tools, "box_delete", map[string]any{"box": "work", "confirm": true}, nil)
	if del["box_id"] != created["box_id"] {
		t.Fatalf("box_delete = %v", del)
	}
	if msg := callIsError(t, cs, "box_status", map[string]any{"box": "work"}); msg == "" {
		t.Error("box_status of a deleted box: no message")
	}

	// Without a token, or with a bad one: 401, before any MCP.
	for _, h := range []string{"", "Bearer cb_" + strings.Repeat("0", 64)} {
		req, _ := http.NewRequest("POST", base+localbox.ControlMCPPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("authorization %q: %s, want 401", h, resp.Status)
		}
	}
}

// rawCall initializes a session by hand and calls method, returning the
// JSON-RPC error code of the answer (0 without one).
func rawCall(t *testing.T, base, tok, method string) int64 {
	t.Helper()
	post := func(session, body string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", base+localbox.ControlMCPPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, body := post(session, `{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{}}`)
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimPrefix(line, "data: ")
		var m struct {
			Error *struct{ Code int64 }
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Error != nil {
			return m.Error.Code
		}
	}
	t.Logf("answer to %s: %s", method, body)
	return 0
}
