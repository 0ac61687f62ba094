package offload

import (
	"github.com/cocoonbox/cocoonbox/handover"

	"bytes"
	"fmt"
	"strings"
)

// HandoverTemplate is the hand-over that handover-path writes for the
// local agent to fill in.
func HandoverTemplate() []byte {
	hints := []string{
		"What the box agent must achieve, and how it knows it is done (tests that pass, behaviour to show).",
		"What the user asked for or ruled out: style, libraries, scope, things not to touch.",
		"Where the work stands: what works, what does not, the last thing tried.",
		"Choices already made and why, so they are not reopened.",
		"Paths changed or created so far, one per line.",
		"The next concrete steps, in order.",
		"Commands to build, test and run, one per line, exactly as typed.",
		"Versions, services, variables and data the work depends on. Secrets needed: names only, never values.",
		"Traps already hit, and how they were avoided.",
		"Questions only the user can answer; the box agent posts them and goes on where it can.",
	}
	var b bytes.Buffer
	b.WriteString(handover.Title + "<the task in one line>\n\n")
	b.WriteString("<!-- Replace each section's text. Keep every heading; an empty section says none. At most 256 KiB. -->\n")
	for i, h := range handover.Headings {
		fmt.Fprintf(&b, "\n%s\n\n%s\n", h, hints[i])
	}
	return b.Bytes()
}

// HandoverPrompt is the request to paste into a coding agent that has no
// cocoonbox plugin: it writes the hand-over to path and offloads with kind.
func HandoverPrompt(path, kind string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Write a hand-over of the task you are working on, so that a fresh %s session in a remote box can continue it with no other context, then offload it.\n\n", kind)
	fmt.Fprintf(&b, "1. Write the hand-over to %s (replace the template there, if any). Rules:\n", path)
	fmt.Fprintf(&b, "   - The first line is %q followed by the task in one line.\n", handover.Title)
	b.WriteString("   - Each of these headings appears exactly once, as its own line; an empty section says none:\n")
	for _, h := range handover.Headings {
		fmt.Fprintf(&b, "     %s\n", h)
	}
	b.WriteString("   - At most 256 KiB. Name secrets the work needs, never their values.\n")
	b.WriteString("2. Commit nothing and push nothing: uncommitted and untracked files travel as they are.\n")
	fmt.Fprintf(&b, "3. Run: cocoonbox offload --kind %s\n", kind)
	b.WriteString("   Exit 4 lists warnings: show them to the user and run it again with --yes only if they agree.\n")
	b.WriteString("   Exit 3 means refused with nothing changed: show the message and its next step to the user.\n")
	b.WriteString("4. Later, `cocoonbox offload inbox` shows the box agent's progress, and `cocoonbox back` brings its commits home.\n")
	return b.String()
}
