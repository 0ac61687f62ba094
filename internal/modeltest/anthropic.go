package modeltest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// messagesRequest is the part of a Messages API request read here.
type messagesRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type block struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// blocks reads a message's content: a string or a list of blocks.
func blocks(raw json.RawMessage) []block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	json.Unmarshal(raw, &bs)
	return bs
}

// userText is the latest prompt a user message carries, or "" when it
// carries none (only tool results, or only the CLI's own reminders).
func userText(bs []block) string {
	ps := userPrompts(bs)
	if len(ps) == 0 {
		return ""
	}
	return ps[len(ps)-1]
}

// userPrompts are the prompts a user message carries, a text block each:
// claude 2.1.197 sends the prompts of turns that failed (an API error)
// with the next one as one message (cli/testdata/realcli/README).
func userPrompts(bs []block) []string {
	// A tool's result carries no prompt, but claude puts the prompt of
	// the turn after a failed one behind the failed turn's last result,
	// in the same message (cli/testdata/realcli/claude_midturn.txtar).
	for i, b := range slices.Backward(bs) {
		if b.Type == "tool_result" {
			bs = bs[i+1:]
			break
		}
	}
	var ps []string
	for _, b := range bs {
		if t := texts([]block{b}, "<system-reminder>", "text"); t != "" {
			ps = append(ps, t)
		}
	}
	return ps
}

// texts joins, a line each, the text of bs's blocks of the given types,
// but for those that are blank or start with skip once trimmed.
func texts(bs []block, skip string, types ...string) string {
	var parts []string
	for _, b := range bs {
		if t := strings.TrimSpace(b.Text); slices.Contains(types, b.Type) && t != "" && !strings.HasPrefix(t, skip) {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// anthropicTurn reads the turn out of a Messages request.
func anthropicTurn(req *messagesRequest) turn {
	t, last := planTurn(len(req.Messages), func(i int) []string {
		if m := req.Messages[i]; m.Role == "user" {
			return userPrompts(blocks(m.Content))
		}
		return nil
	})
	if last < 0 {
		return t
	}
	for _, m := range req.Messages[last+1:] {
		if m.Role == "assistant" {
			for _, b := range blocks(m.Content) {
				if b.Type == "tool_use" {
					t.done++
				}
			}
		}
		if m.Role == "user" {
			var rs []struct {
				Type    string          `json:"type"`
				Content json.RawMessage `json:"content"`
			}
			json.Unmarshal(m.Content, &rs)
			for _, r := range rs {
				if r.Type == "tool_result" {
					t.last = texts(blocks(r.Content), "\x00", "text")
				}
			}
		}
	}
	return t
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request, body []byte) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.record(r, body, "unknown")
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"not JSON"}}`, http.StatusBadRequest)
		return
	}
	bash := false
	var tools []string
	for _, t := range req.Tools {
		bash = bash || t.Name == "Bash"
		tools = append(tools, t.Name)
	}
	var content []map[string]any
	stop, answer := "end_turn", "text"
	cmd, done := "", "Done."
	if bash {
		t := anthropicTurn(&req)
		cmd, done = t.next(), t.answer()
	}
	name, args, isTool := toolAt(cmd)
	if !bash {
		// A side request (a title, a topic, a quota probe): text only.
		answer = "side"
		content = []map[string]any{{"type": "text", "text": `{"title": "Scripted task"}`}}
	} else if failAt(cmd) != NoFault {
		s.record(r, body, "fault:"+failAt(cmd).String())
		s.writeFault(w, r, failAt(cmd))
		return
	} else if isTool && offered(tools, name) == "" {
		answer = "notool:" + name
		content = []map[string]any{{"type": "text", "text": noTool(name, tools)}}
	} else if isTool {
		// A tool_use block as in Anthropic's "Tool use" reference: its
		// input streams as input_json_delta, as Bash's does.
		answer, stop = "call:"+offered(tools, name), "tool_use"
		content = []map[string]any{{"type": "tool_use", "id": s.id("toolu"), "name": offered(tools, name), "input": args}}
	} else if cmd != "" {
		c, long := shellStep(cmd)
		answer, stop = "tool:"+c, "tool_use"
		in := map[string]any{"command": c, "description": "scripted step"}
		if long {
			in["timeout"] = 600000
		}
		content = []map[string]any{{"type": "tool_use", "id": s.id("toolu"), "name": "Bash", "input": in}}
	} else {
		content = []map[string]any{{"type": "text", "text": done}}
	}
	s.record(r, body, answer)
	model := req.Model
	if model == "" {
		model = "scripted"
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	id := s.id("msg")
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	e := newSSE(w)
	e.event("message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	for i, c := range content {
		switch c["type"] {
		case "text":
			e.event("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			e.event("content_block_delta", map[string]any{"index": i,
				"delta": map[string]any{"type": "text_delta", "text": c["text"]}})
		case "tool_use":
			e.event("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(c["input"])
			e.event("content_block_delta", map[string]any{"index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		e.event("content_block_stop", map[string]any{"index": i})
	}
	e.event("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	e.event("message_stop", map[string]any{})
}
