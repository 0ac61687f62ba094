package modeltest

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestPlanOf(t *testing.T) {
	first := "Write your hand-over to /h/handover.md first and send it with `cocoonbox-agent offload post --progress < '/h/handover.md'` (or --back)\n" +
		"## Next steps\nmodel: bash echo a > a.txt\nmodel: progress\nnot a step: model: bash no\n"
	plan := planOf(first, []string{first})
	if len(plan) != 2 || plan[0] != "echo a > a.txt" || !strings.HasSuffix(plan[1], "cocoonbox-agent offload post --progress < '/h/handover.md'") {
		t.Errorf("first prompt's plan: %q", plan)
	}
	back := "BACK: the user is taking this task back now. Stop at a safe point, commit your work (never push), write your hand-over to /h/handover.md with every heading of the template, then run: cocoonbox-agent offload post --back < '/h/handover.md'\n\nmodel: bash echo b"
	plan = planOf(back, []string{first, back})
	if len(plan) != 4 || !strings.HasPrefix(plan[0], "git add -A") || plan[1] != "echo b" ||
		!strings.HasSuffix(plan[2], "> '/h/handover.md'") || plan[3] != "cocoonbox-agent offload post --back < '/h/handover.md'" {
		t.Errorf("BACK's plan: %q", plan)
	}
	if p := planOf("model: fail abc", nil); len(p) != 1 || !strings.Contains(p[0], "bad step") || failAt(p[0]) != NoFault {
		t.Errorf("a bad fail step: %q", p)
	}
	if p := planOf("hello", nil); !slices.Equal(p, nil) {
		t.Errorf("a prompt without steps: %q", p)
	}
}

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The shapes as the CLIs take them: a Messages stream with a Bash tool_use
// (then, with its result, the turn's end), a Responses stream with an
// exec_command call; each request recorded.
func TestServer(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"go\nmodel: bash echo hi"}]}]}`
	out := post(t, s.URL+"/v1/messages?beta=true", msg)
	for _, want := range []string{"event: message_start", `"type":"tool_use"`, `"name":"Bash"`, `"partial_json":"{\"command\":\"echo hi\"`, `"stop_reason":"tool_use"`, "event: message_stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("messages stream lacks %s:\n%s", want, out)
		}
	}
	done := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"model: bash echo hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"hi"}]}]}`
	if out := post(t, s.URL+"/v1/messages", done); !strings.Contains(out, `"stop_reason":"end_turn"`) || strings.Contains(out, "tool_use") {
		t.Errorf("after the result, not the turn's end:\n%s", out)
	}
	resp := `{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"}],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"model: bash echo hi"}]}]}`
	out = post(t, s.URL+"/v1/responses", resp)
	for _, want := range []string{"event: response.created", `"type":"function_call"`, `"name":"exec_command"`, `"arguments":"{\"cmd\":\"echo hi\",\"yield_time_ms\":30000}"`, "event: response.completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("responses stream lacks %s:\n%s", want, out)
		}
	}
	if out := post(t, s.URL+"/v1/messages/count_tokens", msg); !strings.Contains(out, `"input_tokens"`) {
		t.Errorf("count_tokens: %s", out)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || reqs[0].Answer != "tool:echo hi" || reqs[0].Prompt() != "go\nmodel: bash echo hi" || reqs[2].Answer != "tool:echo hi" || reqs[1].Answer != "text" {
		t.Errorf("requests: %+v", reqs)
	}
}

// Prompts of failed turns that claude sends with the next one, as one
// user message: the turn is the last one's.
func TestMergedPrompts(t *testing.T) {
	req := &messagesRequest{}
	json.Unmarshal([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"first\nmodel: bash echo first"},{"type":"text","text":"BACK: the user is taking this task back now.\nmodel: bash echo back"}]}]}`), req)
	if plan := anthropicTurn(req).plan; len(plan) != 2 || !strings.HasPrefix(plan[0], "git add -A") || plan[1] != "echo back" {
		t.Errorf("plan %q, want BACK's", plan)
	}
	// After a turn that failed past a tool call, claude sends the next
	// prompt behind that call's result, in one message (recorded from
	// Claude Code in claude_midturn.txtar): the turn is that prompt's.
	req = &messagesRequest{}
	json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"model: bash echo a\nmodel: fail 529"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"a"},{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"BACK: the user is taking this task back now.\nmodel: bash echo back"}]}]}`), req)
	if tu := anthropicTurn(req); len(tu.plan) != 2 || tu.done != 0 || tu.plan[1] != "echo back" {
		t.Errorf("turn %+v, want BACK's, none done", tu)
	}
}

// The faults: a refused connection, then each status in the vendor's
// error body (Anthropic's for /v1/messages, OpenAI's for responses), then
// the scripted answers again on the same port.
func TestFaults(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"model: bash echo hi"}]}`
	if err := s.SetFault(Refuse); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(msg)); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("refuse: %v, want connection refused", err)
	}
	for _, tt := range []struct {
		f          Fault
		path, want string
	}{
		{500, "/v1/messages?beta=true", `{"error":{"message":"Internal server error","type":"api_error"},"request_id":"req_`},
		{529, "/v1/messages", `{"error":{"message":"Overloaded","type":"overloaded_error"},"request_id":"req_`},
		{401, "/v1/messages", `{"error":{"message":"invalid x-api-key","type":"authentication_error"},"request_id":"req_`},
		{401, "/v1/responses", `{"error":{"code":"invalid_api_key","message":"Incorrect API key provided: sk-scrip`},
		{500, "/v1/responses", `{"error":{"code":null,"message":"The server had an error while processing your request. Sorry about that!","param":null,"type":"server_error"}}`},
		{529, "/v1/responses", `"message":"The engine is currently overloaded, please try again later"`},
	} {
		if err := s.SetFault(tt.f); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(s.URL+tt.path, "application/json", strings.NewReader(msg))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != int(tt.f) || !strings.Contains(string(b), tt.want) {
			t.Errorf("%v %s: %d %s, want %s", tt.f, tt.path, resp.StatusCode, b, tt.want)
		}
	}
	if err := s.SetFault(NoFault); err != nil {
		t.Fatal(err)
	}
	if out := post(t, s.URL+"/v1/messages", msg); !strings.Contains(out, `"name":"Bash"`) {
		t.Errorf("after the faults: %s", out)
	}
	if f, err := ParseFault("529"); f != 529 || err != nil {
		t.Errorf("ParseFault(529) = %v, %v", f, err)
	}
	if _, err := ParseFault("200"); err == nil {
		t.Error("ParseFault(200) took a status that is no error")
	}
}

// "model: fail STATUS": the first request calls the step before it; the
// one with that step's result is answered with STATUS in the vendor's
// body, on both APIs; a later prompt without the step is served again.
func TestFailStep(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"model: bash echo hi\nmodel: fail 529"}]}`
	if out := post(t, s.URL+"/v1/messages", first); !strings.Contains(out, `"partial_json":"{\"command\":\"echo hi\"`) {
		t.Errorf("the step before the fail is not called:\n%s", out)
	}
	after := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"model: bash echo hi\nmodel: fail 529"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"hi"}]}]}`
	resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(after))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || !strings.Contains(string(b), `"type":"overloaded_error"`) {
		t.Errorf("after the step's result: %d %s, want 529 overloaded_error", resp.StatusCode, b)
	}
	oa := `{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"}],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"model: fail 500"}]}]}`
	resp, err = http.Post(s.URL+"/v1/responses", "application/json", strings.NewReader(oa))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(b), `"type":"server_error"`) {
		t.Errorf("responses: %d %s, want 500 server_error", resp.StatusCode, b)
	}
	later := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"model: bash echo hi\nmodel: fail 529"},{"role":"user","content":"model: bash echo again"}]}`
	if out := post(t, s.URL+"/v1/messages", later); !strings.Contains(out, `echo again`) {
		t.Errorf("a later prompt without the step:\n%s", out)
	}
	if reqs := s.Requests(); len(reqs) != 4 || reqs[1].Answer != "fault:529" || reqs[2].Answer != "fault:500" {
		t.Errorf("requests: %+v", reqs)
	}
}

// "model: tool NAME JSON": a Messages stream with a tool_use of the MCP
// tool the request offers under claude's name, a Responses stream with a
// function_call of the namespace codex offers it in; a tool not offered
// ends the turn naming it; ToolCalls pairs each call with its result.
func TestToolStep(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prompt := `go\nmodel: tool box_create {\"name\":\"w\"}\nmodel: tool nope`
	msg := `{"model":"m","stream":true,"tools":[{"name":"Bash"},{"name":"mcp__plugin_cocoonbox_cocoonbox__box_create"}],"messages":[{"role":"user","content":"` + prompt + `"}]}`
	out := post(t, s.URL+"/v1/messages", msg)
	for _, want := range []string{`"type":"tool_use"`, `"name":"mcp__plugin_cocoonbox_cocoonbox__box_create"`, `"partial_json":"{\"name\":\"w\"}"`, `"stop_reason":"tool_use"`} {
		if !strings.Contains(out, want) {
			t.Errorf("messages stream lacks %s:\n%s", want, out)
		}
	}
	after := `{"model":"m","stream":true,"tools":[{"name":"Bash"},{"name":"mcp__plugin_cocoonbox_cocoonbox__box_create"}],"messages":[{"role":"user","content":"` + prompt + `"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"mcp__plugin_cocoonbox_cocoonbox__box_create","input":{"name":"w"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"{\"box_id\":\"b\"}"}],"is_error":true}]}]}`
	if out := post(t, s.URL+"/v1/messages", after); !strings.Contains(out, "modeltest: no tool nope among those offered: Bash, mcp__plugin_cocoonbox_cocoonbox__box_create") {
		t.Errorf("a tool not offered:\n%s", out)
	}
	resp := `{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"},{"type":"namespace","name":"mcp__cocoonbox","tools":[{"type":"function","name":"box_create"}]}],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + prompt + `"}]}]}`
	out = post(t, s.URL+"/v1/responses", resp)
	for _, want := range []string{`"type":"function_call"`, `"name":"box_create"`, `"namespace":"mcp__cocoonbox"`, `"arguments":"{\"name\":\"w\"}"`} {
		if !strings.Contains(out, want) {
			t.Errorf("responses stream lacks %s:\n%s", want, out)
		}
	}
	resp2 := `{"model":"m","stream":true,"tools":[{"type":"namespace","name":"mcp__cocoonbox","tools":[{"type":"function","name":"box_create"}]}],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + prompt + `"}]},` +
		`{"type":"function_call","name":"box_create","namespace":"mcp__cocoonbox","arguments":"{}","call_id":"call_1"},{"type":"function_call_output","call_id":"call_1","output":"Wall time: 0.1 seconds\nOutput:\n{}"}]}`
	post(t, s.URL+"/v1/responses", resp2)
	calls := s.ToolCalls()
	if len(calls) != 2 || calls[0].Name != "mcp__plugin_cocoonbox_cocoonbox__box_create" || !calls[0].Answered || !calls[0].IsError || calls[0].Result != `{"box_id":"b"}` ||
		calls[1].Name != "mcp__cocoonbox__box_create" || calls[1].Result != "Wall time: 0.1 seconds\nOutput:\n{}" || calls[1].IsError {
		t.Errorf("tool calls: %+v", calls)
	}
	reqs := s.Requests()
	if reqs[0].Answer != "call:mcp__plugin_cocoonbox_cocoonbox__box_create" || reqs[1].Answer != "notool:nope" || reqs[2].Answer != "call:mcp__cocoonbox__box_create" {
		t.Errorf("answers: %s %s %s", reqs[0].Answer, reqs[1].Answer, reqs[2].Answer)
	}
	if p := planOf("model: tool box_list [1]", nil); len(p) != 1 || !strings.Contains(p[0], "bad step") {
		t.Errorf("a bad tool step: %q", p)
	}
}

// The plugin's requests, as the model follows them: the hand-over from
// the request's rules (every heading, the title, the secrets line, the
// user's model: lines in Next steps, not run here), written where the
// backquoted command says, then the Run: command, with the kind the
// user's words name; back runs its command with the longest timeout.
func TestRequestPlan(t *testing.T) {
	ask := "The user asked you to offload. Their words, if any: codex\nmodel: bash echo hi\n\n" +
		"If those words name another coding-agent CLI for the box (codex), use its name as --kind below instead of claude.\n\n" +
		"Write a hand-over of the task you are working on, so that ...\n\n" +
		"1. Write the hand-over to the file that `cocoonbox offload handover-path`, run in this repository, prints (replace the template there, if any). Rules:\n" +
		"   - The first line is \"# Hand-over: \" followed by the task in one line.\n" +
		"   - Each of these headings appears exactly once:\n     ## Goal and definition of done\n     ## Next steps\n     ## Environment facts\n" +
		"   - Under ## Environment facts, a line \"Secrets needed: NAME, NAME\" with the names (never their values), or \"Secrets needed: none\".\n" +
		"3. Run: cocoonbox offload --kind claude\n"
	plan := planOf(ask, []string{ask})
	want := "printf '%s' '# Hand-over: codex\n## Goal and definition of done\nnone\n## Next steps\nmodel: bash echo hi\n## Environment facts\nSecrets needed: none\n' > \"$(cocoonbox offload handover-path)\""
	if len(plan) != 2 || plan[0] != want || plan[1] != "cocoonbox offload --kind codex" {
		t.Errorf("offload plan %q", plan)
	}
	back := "The user asked you to bring home ... Their words, if any: \n\n1. Run `cocoonbox back` in this repository. It waits up to 10 minutes\n"
	if plan := planOf(back, []string{back}); len(plan) != 1 || plan[0] != longStep+"cocoonbox back" {
		t.Errorf("back plan %q", plan)
	}
}

// At the end of a request of ours the model relays the last command's
// output (exit 3 and 4 findings) to the user; at the end of other turns
// it says only "Done.".
func TestRelay(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	back := `The user asked you to bring home ... Their words, if any: \n\n1. Run ` + "`cocoonbox back`" + ` in this repository. It waits\n`
	req := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"` + back + `"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"Exit code 3\nnothing of this repo is in a box"}]}]}`
	if out := post(t, s.URL+"/v1/messages", req); !strings.Contains(out, `Done. The command said:\nExit code 3\nnothing of this repo is in a box`) {
		t.Errorf("not relayed:\n%s", out)
	}
	other := strings.Replace(req, back, `model: bash false`, 1)
	if out := post(t, s.URL+"/v1/messages", other); !strings.Contains(out, `"text":"Done."`) {
		t.Errorf("another turn's end:\n%s", out)
	}
}
