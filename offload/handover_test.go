package offload

import (
	"fmt"
	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/handover"

	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHandoverTemplateAndPrompt(t *testing.T) {
	if err := handover.Validate(HandoverTemplate()); err != nil {
		t.Errorf("the template does not validate: %v", err)
	}
	tpl := string(HandoverTemplate())
	for _, h := range handover.Headings {
		if strings.Count(tpl, "\n"+h+"\n") != 1 {
			t.Errorf("the template has %q not exactly once", h)
		}
	}
	p := HandoverPrompt("/x/handover.md", "codex", func(c Command) string { return fmt.Sprintf("<%d %s>", c.Verb, c.Kind) })
	for _, want := range append([]string{"/x/handover.md", fmt.Sprintf("Run: <%d codex>", VerbOffload), handover.Title}, handover.Headings...) {
		if !strings.Contains(p, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
}

// TestReadHandoverTemplateLeft: a hand-over still holding the template's
// text anywhere is refused, naming where; one filled in is taken.
func TestReadHandoverTemplateLeft(t *testing.T) {
	st, write := handoverStore(t)
	tpl := string(HandoverTemplate())
	// Only the first line replaced, as a new user did.
	write(strings.Replace(tpl, "<the task in one line>", "fix the login bug", 1))
	_, err := ReadHandover(st, "k")
	var e *Error
	if p := problems(err); !errors.As(err, &e) || e.Code != ExitRefused || len(p) != 1 ||
		!strings.HasPrefix(p[0], "still holds the template's text in ## Goal and definition of done, ") ||
		!strings.HasSuffix(p[0], "## Open questions") || strings.Contains(p[0], "task line") {
		t.Errorf("only the first line replaced: %v %q", err, p)
	}
	// Every section filled but one, and the task line left.
	filled := string(validHandover("make", "Secrets needed: none"))
	filled = strings.Replace(filled, "add a greeting", "<the task in one line>", 1)
	filled = strings.Replace(filled, "## Gotchas learned\n\nnone\n", "## Gotchas learned\n\n"+templateHints[8]+"\n", 1)
	write(filled)
	if _, err := ReadHandover(st, "k"); !slices.Equal(problems(err), []string{"still holds the template's text in the task line, ## Gotchas learned"}) {
		t.Errorf("one section left: %v %q", err, problems(err))
	}
	write(string(validHandover("make", "Secrets needed: none")))
	if _, err := ReadHandover(st, "k"); err != nil {
		t.Errorf("a filled hand-over: %v", err)
	}
}

// TestReadHandoverEveryProblem: one refusal names each problem of the
// hand-over, one finding each, with the next step for all of them.
func TestReadHandoverEveryProblem(t *testing.T) {
	st, write := handoverStore(t)
	h := string(validHandover("make", "none"))
	h = strings.Replace(h, "## Open questions\n", "", 1)
	h = strings.Replace(h, "## Next steps\n\nnone\n", "## Next steps\n\n"+templateHints[5]+"\n", 1)
	h += "\n## Commands\n\nmake test\n"
	write(h)
	_, err := ReadHandover(st, "k")
	want := []string{"lacks ## Open questions", "has ## Commands more than once", "still holds the template's text in ## Next steps"}
	var e *Error
	if !errors.As(err, &e) || e.Code != ExitRefused || !slices.Equal(problems(err), want) {
		t.Fatalf("got %v %q, want a refusal naming %q", err, problems(err), want)
	}
	if len(e.Next) != 1 || !strings.Contains(nextText(e.Next[0]), "replace the template's text") || !strings.Contains(nextText(e.Next[0]), "fix "+st.HandoverPath("k")) {
		t.Errorf("next steps: %q", e.Next)
	}
	for _, f := range e.Findings {
		if f.Check != "handover" || f.Outcome != agentwire.Block {
			t.Errorf("finding %+v, want a handover block", f)
		}
	}
}

// handoverStore is a store with repo k's directory, and a func that
// writes k's hand-over.
func handoverStore(t *testing.T) (Store, func(string)) {
	st := Store{Dir: filepath.Join(t.TempDir(), "offload")}
	if _, err := st.EnsureRepoDir("k"); err != nil {
		t.Fatal(err)
	}
	return st, func(b string) {
		if err := os.WriteFile(st.HandoverPath("k"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// problems are the details of a refusal's findings.
func problems(err error) []string {
	var e *Error
	if !errors.As(err, &e) {
		return nil
	}
	var ps []string
	for _, f := range e.Findings {
		ps = append(ps, f.Detail)
	}
	return ps
}

// TestHandoverPromptNoKind: without a kind the prompt's command is one an
// agent can run once it fills in KIND, not a shell pipeline.
func TestHandoverPromptNoKind(t *testing.T) {
	p := HandoverPrompt("/x/handover.md", "", func(c Command) string { return fmt.Sprintf("<%d %s>", c.Verb, c.Kind) })
	if strings.Contains(p, "|") || !strings.Contains(p, fmt.Sprintf("3. Run: <%d KIND>\n", VerbOffload)) || !strings.Contains(p, "claude, codex") {
		t.Errorf("the prompt without a kind:\n%s", p)
	}
	if !strings.Contains(p, "Secrets needed: none") {
		t.Errorf("the prompt does not say how to name secrets:\n%s", p)
	}
}
