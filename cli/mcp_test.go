package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// cocoonbox mcp, driven by the Go SDK's client over its stdio, against a
// local box on its unix socket with the token saved in the credentials
// file (none in argv or the environment): the control MCP's nine tools
// and ours; results, isError refusals and -32602 come through unchanged;
// progress notifications come back under the caller's token.
func TestMCPBridge(t *testing.T) {
	bin, err := exec.LookPath("cocoonbox")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	srv := &localbox.Server{Dir: state}
	if err := srv.CreateBox(localbox.DefaultBox); err != nil {
		t.Fatal(err)
	}
	lis, url, err := localbox.Listen(state, "")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := localbox.IssueToken(state, "test", auth.ClientID)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	if err := (auth.FileStore{Dir: filepath.Join(dir, ".config", "cocoonbox")}).Put(url, auth.Credential{Token: tok, Source: auth.SourcePaste}); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "mcp")
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "COCOONBOX_ENDPOINT=" + url}
	cmd.Stderr = os.Stderr
	events := make(chan *mcp.ProgressNotificationParams, 100)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { events <- r.Params },
	})
	cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
		// The hints come through: Codex asks the user by them.
		a := tl.Annotations
		switch tl.Name {
		case "box_list", "box_status", "usage", "cocoonbox_offload_status", "cocoonbox_offload_inbox":
			if a == nil || !a.ReadOnlyHint {
				t.Errorf("%s is not marked read-only: %+v", tl.Name, a)
			}
		case "box_delete", "box_upgrade":
			if a == nil || a.DestructiveHint == nil || !*a.DestructiveHint {
				t.Errorf("%s is not marked destructive: %+v", tl.Name, a)
			}
		default:
			if a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
				t.Errorf("%s is not marked as neither reading only nor destroying, closed world: %+v", tl.Name, a)
			}
		}
	}
	for _, n := range append(localbox.ControlTools(), "cocoonbox_offload_status", "cocoonbox_offload_inbox", "cocoonbox_offload_send") {
		if !slices.Contains(names, n) {
			t.Errorf("tools %v lack %s", names, n)
		}
	}

	call := func(name string, args map[string]any, token any) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		if token != nil {
			p.SetProgressToken(token)
		}
		return cs.CallTool(t.Context(), p)
	}
	r, err := call("box_create", map[string]any{"name": "work"}, "mine")
	if err != nil || r.IsError {
		t.Fatalf("box_create: %v %+v", err, r)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(r.Content[0].(*mcp.TextContent).Text), &out); err != nil || out["name"] != "work" || r.StructuredContent == nil {
		t.Fatalf("box_create result: %v %+v", err, r)
	}
	for _, want := range []string{"creating", "done"} {
		if p := <-events; p.Message != want || p.ProgressToken != "mine" {
			t.Fatalf("progress %+v, want %s under the caller's token", p, want)
		}
	}
	if r, err := call("box_delete", map[string]any{"box": "work", "confirm": false}, nil); err != nil || !r.IsError {
		t.Fatalf("box_delete without confirm: %v %+v", err, r)
	}
	for _, bad := range []struct {
		name string
		args map[string]any
	}{{"box_delete", map[string]any{"box": "work"}}, {"box_create", map[string]any{"name": 1}}, {"nope", nil},
		{"box_status", map[string]any{"name": "ghost"}}} {
		_, err := call(bad.name, bad.args, nil)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s %v: %v, want -32602", bad.name, bad.args, err)
		}
	}
	if _, err := call("box_hibernate", map[string]any{"box": "work"}, nil); err != nil {
		t.Fatal(err)
	}
	r, err = call("cocoonbox_offload_status", nil, nil)
	if err != nil || r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "box work: hibernated (not woken)") {
		t.Fatalf("cocoonbox_offload_status: %v %+v", err, r)
	}
	if r, err := call("box_status", map[string]any{"box": "work"}, nil); err != nil || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, `"state":"hibernated"`) {
		t.Fatalf("box_status after offload status: %v %+v", err, r)
	}
}
