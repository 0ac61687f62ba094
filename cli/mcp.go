package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/bridge"
	"github.com/cocoonbox/cocoonbox/internal/version"
)

func newMCP(env Env, s Streams) *cobra.Command {
	var endpoint string
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve your boxes' control MCP to a local coding agent on stdio",
		Long: `mcp is an MCP server on stdin and stdout for a coding agent on this computer
(claude mcp add cocoonbox -- cocoonbox mcp; codex mcp add cocoonbox --
cocoonbox mcp). It forwards the endpoint's control MCP (box_list, box_status,
box_ensure, box_create, box_hibernate, box_save, box_upgrade, box_delete,
usage) with the token cocoonbox login saved, which never appears in the
agent's configuration or in argv, and adds tools of ours for the sessions
offloaded to a box: cocoonbox_offload_status, cocoonbox_offload_inbox and
cocoonbox_offload_send.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return runMCP(env, s, endpoint) },
	}
	addEndpointFlag(c, &endpoint)
	return c
}

func runMCP(env Env, s Streams, endpoint string) error {
	ep, err := box.ResolveEndpoint(endpoint, env.Getenv)
	if err != nil {
		return err
	}
	tok, err := env.token(ep)
	if err != nil {
		return err
	}
	src := func() string { return tok }
	if env.Getenv("COCOONBOX_TOKEN") == "" {
		if f, err := env.tokenSource(ep, tok); err == nil {
			src = f
		}
	}
	url, hc, err := box.ControlMCP(ep, src)
	if err != nil {
		return err
	}
	ctx := context.Background()
	b, err := bridge.New(ctx, bridge.Options{URL: url, HTTPClient: hc, Version: version.String(), Ours: offloadTools(env, endpoint)})
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		// The URL a unix socket's client uses (http://localbox/...) is
		// no address a user knows: name the endpoint and the next step.
		return fmt.Errorf("the control MCP at %s did not answer: %v; %s", ep.URL, oe.Err, env.unreachableHint(ep))
	}
	if err != nil {
		return err
	}
	return b.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(s.In), Writer: nopWriteCloser{s.Out}})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// offloadTools are the bridge's tools of ours: each runs this cocoonbox
// in the agent's directory, as the user would at its prompt.
func offloadTools(env Env, endpoint string) []bridge.Tool {
	noArgs := json.RawMessage(`{"type":"object","properties":{}}`)
	// The hints agents decide by whether to ask the user first
	// (docs/protocol.md): the two that read, and send, which neither
	// reads only nor destroys.
	no := false
	return []bridge.Tool{
		{
			Tool: &mcp.Tool{Name: "cocoonbox_offload_status", InputSchema: noArgs, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no},
				Description: "(cocoonbox CLI's own tool, not the control MCP's.) Show the coding-agent sessions offloaded " +
					"to each of your boxes (repository, CLI, status such as working, idle or stopped, copy state). " +
					"A hibernated box is reported as such and is not woken."},
			Handler: func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return offloadStatusAll(ctx, env, endpoint), nil
			},
		},
		{
			Tool: &mcp.Tool{Name: "cocoonbox_offload_inbox", InputSchema: noArgs, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no},
				Description: "(cocoonbox CLI's own tool.) Show what the box agent of this repository's offload posted " +
					"since you last looked (progress, questions, its back), and its session's status."},
			Handler: func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return runSelf(ctx, endpoint, "offload", "inbox"), nil
			},
		},
		{
			Tool: &mcp.Tool{Name: "cocoonbox_offload_send", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no},
				InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"The message for the box agent."}},"required":["text"]}`),
				Description: "(cocoonbox CLI's own tool.) Send a message to the box agent working on this repository's " +
					"offload: it is pasted when the agent is idle, else queued until its turn ends."},
			Handler: func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var a struct{ Text string }
				if err := json.Unmarshal(req.Params.Arguments, &a); err != nil || strings.TrimSpace(a.Text) == "" {
					return toolText("the message is empty: give text", true), nil
				}
				return runSelf(ctx, endpoint, "offload", "send", a.Text), nil
			},
		},
	}
}

// offloadStatusAll runs offload status for each running box; hibernated
// boxes are listed without being woken.
func offloadStatusAll(ctx context.Context, env Env, endpoint string) *mcp.CallToolResult {
	c, err := env.dial(endpoint)
	if err != nil {
		return toolText(err.Error(), true)
	}
	defer c.Close()
	bs, err := c.List(ctx)
	if err != nil {
		return toolText(err.Error(), true)
	}
	var out strings.Builder
	for _, b := range bs {
		if b.State != "running" {
			fmt.Fprintf(&out, "box %s: %s (not woken)\n", b.Name, b.State)
			continue
		}
		r := runSelf(ctx, endpoint, "offload", "status", "--box", b.Name)
		fmt.Fprintf(&out, "box %s:\n%s\n", b.Name, strings.TrimRight(r.Content[0].(*mcp.TextContent).Text, "\n"))
	}
	if len(bs) == 0 {
		out.WriteString("you have no box\n")
	}
	return toolText(out.String(), false)
}

// runSelf runs this cocoonbox with args in the current directory and
// returns its output as a tool result: isError when it fails.
func runSelf(ctx context.Context, endpoint string, args ...string) *mcp.CallToolResult {
	exe, err := os.Executable()
	if err != nil {
		return toolText(err.Error(), true)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	if endpoint != "" {
		cmd.Env = append(os.Environ(), "COCOONBOX_ENDPOINT="+endpoint)
	}
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return toolText(out.String(), err != nil)
}

func toolText(s string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: redactTokens(s)}}}
}
