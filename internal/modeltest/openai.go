package modeltest

import (
	"encoding/json"
	"net/http"
)

// responsesRequest is the part of a Responses API request read here.
type responsesRequest struct {
	Model string `json:"model"`
	Input []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"input"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

// inputText is the prompt a user input message carries, or "" for the
// CLI's own context messages (<environment_context>, <user_instructions>
// and the like).
func inputText(raw json.RawMessage) string {
	return texts(blocks(raw), "<", "input_text", "text")
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
	cmd := responsesTurn(&req).next()
	if f := failAt(cmd); f != NoFault && len(req.Tools) > 0 {
		s.record(r, body, "fault:"+f.String())
		s.writeFault(w, r, f)
		return
	}
	if cmd != "" && len(req.Tools) > 0 {
		answer = "tool:" + cmd
		name, args := shellCall(&req, cmd)
		a, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "id": s.id("fc"), "call_id": s.id("call"), "name": name,
			"arguments": string(a), "status": "completed"}
	} else {
		if len(req.Tools) == 0 {
			answer = "side"
		}
		item = map[string]any{"type": "message", "id": s.id("msg"), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": "Done.", "annotations": []any{}}}}
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
		e.event("response.output_text.delta", map[string]any{"item_id": item["id"],
			"output_index": 0, "content_index": 0, "delta": "Done."})
	}
	e.event("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	e.event("response.completed", map[string]any{"response": resp("completed", []any{item})})
}
