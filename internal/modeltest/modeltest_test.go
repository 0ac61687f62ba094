package modeltest

import (
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
