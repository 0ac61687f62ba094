package modeltest

import (
	"encoding/json"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// toolStep starts a plan step that calls a tool other than the shell
// ("model: tool NAME JSON"): toolStep, NAME, a space, the JSON object.
const toolStep = "\x00tool "

// toolStepOf is the plan step of "model: tool" line's rest: NAME and an
// optional JSON object. A rest that is no such thing becomes a shell step
// that fails naming the mistake, as a bad fail step does.
func toolStepOf(rest string) string {
	name, args, _ := strings.Cut(rest, " ")
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	var obj map[string]any
	if name == "" || json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return "echo " + shellquote.Quote("modeltest: bad step: model: tool "+rest+" (want NAME and a JSON object)") + " >&2; exit 97"
	}
	b, _ := json.Marshal(obj)
	return toolStep + name + " " + string(b)
}

// toolAt is the tool and arguments plan step cmd calls, when it is a tool
// step.
func toolAt(cmd string) (name string, args map[string]any, ok bool) {
	rest, ok := strings.CutPrefix(cmd, toolStep)
	if !ok {
		return "", nil, false
	}
	name, raw, _ := strings.Cut(rest, " ")
	json.Unmarshal([]byte(raw), &args)
	return name, args, true
}

// offered is the tool of offered (the names of the tools a request
// offers) that name means: the one named name, else the one whose name
// ends in "__"+name (an MCP server's tool: claude names it
// mcp__<server>__<tool>, a plugin's server plugin_<plugin>_<server>), or
// "" when none or more than one is.
func offered(tools []string, name string) string {
	var found []string
	for _, t := range tools {
		if t == name {
			return t
		}
		if strings.HasSuffix(t, "__"+name) {
			found = append(found, t)
		}
	}
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// noTool is the text the model answers with when a step's tool is not
// offered: the turn ends there, and the script's checks of the tool's
// result fail.
func noTool(name string, tools []string) string {
	return "modeltest: no tool " + name + " among those offered: " + strings.Join(tools, ", ")
}

// ToolCall is one call of a tool the model made in a conversation, and
// the result the CLI sent back with its next request.
type ToolCall struct {
	// ID is the call's id (Messages: the tool_use id; Responses: the
	// call_id); Name the tool as the request named it (a function of a
	// namespace as NAMESPACE__NAME); Input its arguments, a JSON object.
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// Answered is whether a request carried the call's result; Result is
	// its text (Messages: the tool_result's text blocks joined by a
	// newline; Responses: function_call_output's output, or its text
	// items joined), IsError whether the CLI marked it an error
	// (Messages: is_error; Responses has no such mark, so it is false).
	Answered bool   `json:"answered"`
	Result   string `json:"result"`
	IsError  bool   `json:"is_error"`
}

// ToolCalls are the calls of tools the model made, in the order the
// requests carried them, each once: from the conversation in each
// request (Messages: an assistant's tool_use blocks and the user's
// tool_result blocks, per Anthropic's "Tool use" reference; Responses:
// function_call and function_call_output items, per OpenAI's "Function
// calling" reference).
func (s *Server) ToolCalls() []ToolCall {
	var out []ToolCall
	at := map[string]int{}
	add := func(c ToolCall) {
		i, ok := at[c.ID]
		if !ok {
			at[c.ID] = len(out)
			out = append(out, c)
			return
		}
		if c.Name != "" {
			out[i].Name, out[i].Input = c.Name, c.Input
		}
		if c.Answered {
			out[i].Answered, out[i].Result, out[i].IsError = true, c.Result, c.IsError
		}
	}
	for _, r := range s.Requests() {
		if len(r.Body) == 0 {
			continue
		}
		if strings.HasPrefix(r.Path, "/v1/messages") {
			var m struct {
				Messages []struct {
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			json.Unmarshal(r.Body, &m)
			for _, msg := range m.Messages {
				var bs []struct {
					Type      string          `json:"type"`
					ID        string          `json:"id"`
					Name      string          `json:"name"`
					Input     json.RawMessage `json:"input"`
					ToolUseID string          `json:"tool_use_id"`
					Content   json.RawMessage `json:"content"`
					IsError   bool            `json:"is_error"`
				}
				json.Unmarshal(msg.Content, &bs)
				for _, b := range bs {
					switch b.Type {
					case "tool_use":
						add(ToolCall{ID: b.ID, Name: b.Name, Input: b.Input})
					case "tool_result":
						add(ToolCall{ID: b.ToolUseID, Answered: true, Result: texts(blocks(b.Content), "\x00", "text"), IsError: b.IsError})
					}
				}
			}
			continue
		}
		var o struct {
			Input []struct {
				Type      string          `json:"type"`
				CallID    string          `json:"call_id"`
				Name      string          `json:"name"`
				Namespace string          `json:"namespace"`
				Arguments string          `json:"arguments"`
				Output    json.RawMessage `json:"output"`
			} `json:"input"`
		}
		json.Unmarshal(r.Body, &o)
		for _, it := range o.Input {
			switch it.Type {
			case "function_call":
				name := it.Name
				if it.Namespace != "" {
					name = it.Namespace + "__" + name
				}
				add(ToolCall{ID: it.CallID, Name: name, Input: json.RawMessage(it.Arguments)})
			case "function_call_output":
				add(ToolCall{ID: it.CallID, Answered: true, Result: outputText(it.Output)})
			}
		}
	}
	return out
}

// outputText is a function_call_output's output: a string, or a list of
// content items whose text items are joined by a newline.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &items)
	var parts []string
	for _, it := range items {
		if it.Type == "input_text" || it.Type == "output_text" || it.Type == "text" {
			parts = append(parts, it.Text)
		}
	}
	return strings.Join(parts, "\n")
}
