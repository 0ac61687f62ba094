package modeltest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// responsesRequest is the part of a Responses API request read here.
type responsesRequest struct {
	Model string `json:"model"`
	Input []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
	} `json:"input"`
	Tools []responsesTool `json:"tools"`
}

// responsesTool is a tool a Responses request offers: a function, or a
// namespace of functions (codex 0.171 offers an MCP server's tools as the
// namespace mcp__<server>).
type responsesTool struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

// toolNames are the names of the functions req offers, a function of a
// namespace as NAMESPACE__NAME, and where each is: its namespace ("" for
// none) and its own name.
func (req *responsesRequest) toolNames() ([]string, map[string][2]string) {
	var names []string
	where := map[string][2]string{}
	for _, t := range req.Tools {
		if t.Type == "namespace" {
			for _, f := range t.Tools {
				n := t.Name + "__" + f.Name
				names = append(names, n)
				where[n] = [2]string{t.Name, f.Name}
			}
			continue
		}
		names = append(names, t.Name)
		where[t.Name] = [2]string{"", t.Name}
	}
	return names, where
}

// inputText is the prompt a user input message carries, or "" for the
// CLI's own context messages (<environment_context>, <user_instructions>
// and the like). A skill the user named (codex 0.171 sends its SKILL.md
// as a message "<skill>\n<name>...</name>\n<path>...</path>\n..." after
// the user's) is a prompt: the model follows it.
func inputText(raw json.RawMessage) string {
	bs := blocks(raw)
	for _, b := range bs {
		if strings.HasPrefix(strings.TrimSpace(b.Text), "<skill>") {
			return b.Text
		}
	}
	return texts(bs, "<", "input_text", "text")
}

func responsesTurn(req *responsesRequest) turn {
	t, last := planTurn(len(req.Input), func(i int) []string {
		if it := req.Input[i]; (it.Type == "message" || it.Type == "") && it.Role == "user" {
			if t := inputText(it.Content); t != "" {
				return []string{t}
			}
		}
		return nil
	})
	if last < 0 {
		return t
	}
	for _, it := range req.Input[last+1:] {
		switch it.Type {
		case "function_call", "local_shell_call", "custom_tool_call":
			t.done++
		case "function_call_output":
			t.last = outputText(it.Output)
		}
	}
	return t
}

// shellCall is the function call that runs cmd with the shell tool the
// request offers: shell_command and exec_command take a string, shell an
// argv. exec_command (codex 0.171) returns after yield_time_ms with the
// command still running (10 s unless asked, 30 s at most); the step asks
// for the most, so a step that waits holds the turn that long.
func shellCall(req *responsesRequest, cmd string) (name string, args map[string]any) {
	have := map[string]bool{}
	for _, t := range req.Tools {
		have[t.Name] = true
	}
	switch {
	case have["shell_command"]:
		return "shell_command", map[string]any{"command": cmd}
	case have["exec_command"]:
		return "exec_command", map[string]any{"cmd": cmd, "yield_time_ms": 30000}
	}
	return "shell", map[string]any{"command": []string{"bash", "-lc", cmd}}
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request, body []byte) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.record(r, body, "unknown")
		http.Error(w, `{"error":{"message":"not JSON"}}`, http.StatusBadRequest)
		return
	}
	var item map[string]any
	answer := "text"
	tu := responsesTurn(&req)
	cmd := tu.next()
	if f := failAt(cmd); f != NoFault && len(req.Tools) > 0 {
		s.record(r, body, "fault:"+f.String())
		s.writeFault(w, r, f)
		return
	}
	tools, where := req.toolNames()
	if name, args, ok := toolAt(cmd); ok && len(req.Tools) > 0 {
		// A function_call item as in OpenAI's "Function calling" guide:
		// arguments a JSON string; a function of a namespace is called by
		// its own name with the namespace beside it.
		if n := offered(tools, name); n != "" {
			answer = "call:" + n
			a, _ := json.Marshal(args)
			item = map[string]any{"type": "function_call", "id": s.id("fc"), "call_id": s.id("call"), "name": where[n][1],
				"arguments": string(a), "status": "completed"}
			if ns := where[n][0]; ns != "" {
				item["namespace"] = ns
			}
		} else {
			answer = "notool:" + name
			item = map[string]any{"type": "message", "id": s.id("msg"), "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": noTool(name, tools), "annotations": []any{}}}}
		}
	} else if cmd != "" && len(req.Tools) > 0 {
		cmd, _ = shellStep(cmd)
		answer = "tool:" + cmd
		name, args := shellCall(&req, cmd)
		a, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "id": s.id("fc"), "call_id": s.id("call"), "name": name,
			"arguments": string(a), "status": "completed"}
	}
	if item == nil {
		if len(req.Tools) == 0 {
			answer = "side"
		}
		text := "Done."
		if len(req.Tools) > 0 {
			text = tu.answer()
		}
		item = map[string]any{"type": "message", "id": s.id("msg"), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	s.record(r, body, answer)
	id := s.id("resp")
	resp := func(status string, output []any) map[string]any {
		return map[string]any{"id": id, "object": "response", "status": status, "model": req.Model, "output": output,
			"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}}
	}
	e := newSSE(w)
	e.event("response.created", map[string]any{"response": resp("in_progress", []any{})})
	e.event("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	if item["type"] == "message" {
		text := item["content"].([]any)[0].(map[string]any)["text"]
		e.event("response.output_text.delta", map[string]any{"item_id": item["id"],
			"output_index": 0, "content_index": 0, "delta": text})
	}
	e.event("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	e.event("response.completed", map[string]any{"response": resp("completed", []any{item})})
}
