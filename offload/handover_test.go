package offload

import (
	"github.com/cocoonbox/cocoonbox/handover"

	"errors"
	"os"
	"path/filepath"
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
	p := HandoverPrompt("/x/handover.md", "codex")
	for _, want := range append([]string{"/x/handover.md", "cocoonbox offload --kind codex", handover.Title}, handover.Headings...) {
		if !strings.Contains(p, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
}

// TestReadHandoverTemplateLeft: a hand-over still holding the template's
// text anywhere is refused, naming where; one filled in is taken.
func TestReadHandoverTemplateLeft(t *testing.T) {
	st := Store{Dir: filepath.Join(t.TempDir(), "offload")}
	if _, err := st.EnsureRepoDir("k"); err != nil {
		t.Fatal(err)
	}
	write := func(b string) {
		if err := os.WriteFile(st.HandoverPath("k"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tpl := string(HandoverTemplate())
	// Only the first line replaced, as a new user did.
	write(strings.Replace(tpl, "<the task in one line>", "fix the login bug", 1))
	_, err := ReadHandover(st, "k")
	var e *Error
	if !errors.As(err, &e) || e.Code != ExitRefused || !strings.Contains(err.Error(), "still holds the template's text in ## Goal and definition of done, ") ||
		!strings.Contains(err.Error(), "## Open questions") || strings.Contains(err.Error(), "task line") {
		t.Errorf("only the first line replaced: %v", err)
	}
	// Every section filled but one, and the task line left.
	filled := string(validHandover("make", "Secrets needed: none"))
	filled = strings.Replace(filled, "add a greeting", "<the task in one line>", 1)
	filled = strings.Replace(filled, "## Gotchas learned\n\nnone\n", "## Gotchas learned\n\n"+templateHints[8]+"\n", 1)
	write(filled)
	if _, err := ReadHandover(st, "k"); err == nil || !strings.HasSuffix(err.Error(), "in the task line, ## Gotchas learned") {
		t.Errorf("one section left: %v", err)
	}
	write(string(validHandover("make", "Secrets needed: none")))
	if _, err := ReadHandover(st, "k"); err != nil {
		t.Errorf("a filled hand-over: %v", err)
	}
}

// TestHandoverPromptNoKind: without a kind the prompt's command is one an
// agent can run once it fills in KIND, not a shell pipeline.
func TestHandoverPromptNoKind(t *testing.T) {
	p := HandoverPrompt("/x/handover.md", "")
	if strings.Contains(p, "|") || !strings.Contains(p, "3. Run: cocoonbox offload --kind KIND\n") || !strings.Contains(p, "claude, codex") {
		t.Errorf("the prompt without a kind:\n%s", p)
	}
	if !strings.Contains(p, "Secrets needed: none") {
		t.Errorf("the prompt does not say how to name secrets:\n%s", p)
	}
}
