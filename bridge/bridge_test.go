package bridge_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/bridge"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// A call that runs no operation returns with its result even when the
// agent asked for progress: only a call whose result names an operation
// waits for that operation's last notification (FinalWait, here far
// longer than the test may take). Claude Code and Codex send a progress
// token with every call; box_list and box_status took FinalWait each.
func TestNoOperationNoWait(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
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
	ep, err := box.ParseEndpoint(url)
	if err != nil {
		t.Fatal(err)
	}
	curl, hc, err := box.ControlMCP(ep, func() string { return tok })
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(t.Context(), bridge.Options{URL: curl, HTTPClient: hc, Version: "test", FinalWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	go b.Run(t.Context(), st)
	events := make(chan *mcp.ProgressNotificationParams, 100)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { events <- r.Params },
	})
	cs, err := c.Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	// A hang guard, not a measure: without the fix the call waits an hour.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, name := range []string{"box_list", "box_status", "box_ensure"} {
		p := &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}
		p.SetProgressToken(name)
		if r, err := cs.CallTool(ctx, p); err != nil || r.IsError {
			t.Fatalf("%s with a progress token: %v %+v", name, err, r)
		}
	}
	// An operation's call still gets its notifications, the last too.
	p := &mcp.CallToolParams{Name: "box_hibernate", Arguments: map[string]any{}}
	p.SetProgressToken("sleep")
	if r, err := cs.CallTool(ctx, p); err != nil || r.IsError {
		t.Fatalf("box_hibernate: %v %+v", err, r)
	}
	for {
		select {
		case ev := <-events:
			if ev.ProgressToken == "sleep" && ev.Meta["phase"] == "done" {
				return
			}
		case <-ctx.Done():
			t.Fatal("box_hibernate's last progress notification never came")
		}
	}
}
