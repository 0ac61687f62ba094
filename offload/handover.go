package offload

import (
	"github.com/cocoonbox/cocoonbox/handover"

	"bytes"
	"fmt"
	"strings"
)

// templateTask is the template's first line after the title.
const templateTask = "<the task in one line>"

// templateHints are the template's text under each of handover.Headings.
// The one under Environment facts names the "Secrets needed:" line the
// preflight reads without being one itself.
var templateHints = []string{
	"What the box agent must achieve, and how it knows it is done (tests that pass, behaviour to show).",
	"What the user asked for or ruled out: style, libraries, scope, things not to touch.",
	"Where the work stands: what works, what does not, the last thing tried.",
	"Choices already made and why, so they are not reopened.",
	"Paths changed or created so far, one per line.",
	"The next concrete steps, in order.",
	"Commands to build, test and run, one per line, exactly as typed.",
	"Versions, services, variables and data the work depends on; then a line \"Secrets needed: NAME, NAME\" (names only, never values), or \"Secrets needed: none\".",
	"Traps already hit, and how they were avoided.",
	"Questions only the user can answer; the box agent posts them and goes on where it can.",
}

// HandoverTemplate is the hand-over that handover-path writes for the
// local agent to fill in.
func HandoverTemplate() []byte {
	var b bytes.Buffer
	b.WriteString(handover.Title + templateTask + "\n\n")
	b.WriteString("<!-- Replace each section's text. Keep every heading; an empty section says none. At most 256 KiB. -->\n")
	for i, h := range handover.Headings {
		fmt.Fprintf(&b, "\n%s\n\n%s\n", h, templateHints[i])
	}
	return b.Bytes()
}

// templateLeft lists what of a hand-over is still the template's:
// the task line, and each heading whose section is only its hint.
func templateLeft(b []byte) []string {
	lines := strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
	var left []string
	if strings.TrimSpace(strings.TrimPrefix(lines[0], handover.Title)) == templateTask {
		left = append(left, "the task line")
	}
	hint := map[string]string{}
	for i, h := range handover.Headings {
		hint[h] = templateHints[i]
	}
	heading, body := "", []string(nil)
	flush := func() {
		if want, ok := hint[heading]; ok && strings.Join(body, " ") == want {
			left = append(left, heading)
		}
	}
	for _, l := range lines[1:] {
		t := strings.TrimRight(l, " \t")
		if _, ok := hint[t]; ok {
			flush()
			heading, body = t, nil
			continue
		}
		if t = strings.TrimSpace(t); t != "" && !strings.HasPrefix(t, "<!--") {
			body = append(body, t)
		}
	}
	flush()
	return left
}

// HandoverPrompt is the request for a coding agent (pasted, or the body of
// the commands cocoonbox setup installs): it writes the hand-over to path
// and offloads with
// kind; with kind empty, the agent asks the user which kind. cmd spells
// the commands it names.
func HandoverPrompt(path, kind string, cmd func(Command) string) string {
	var b strings.Builder
	who, run := "coding-agent", cmd(Command{Verb: VerbOffload, Kind: "KIND"})
	if kind != "" {
		who, run = kind, cmd(Command{Verb: VerbOffload, Kind: kind})
	}
	fmt.Fprintf(&b, "Write a hand-over of the task you are working on, so that a fresh %s session in a remote box can continue it with no other context, then offload it.\n\n", who)
	fmt.Fprintf(&b, "1. Write the hand-over to %s (replace the template there, if any). Rules:\n", path)
	fmt.Fprintf(&b, "   - The first line is %q followed by the task in one line.\n", handover.Title)
	b.WriteString("   - Each of these headings appears exactly once, as its own line; an empty section says none:\n")
	for _, h := range handover.Headings {
		fmt.Fprintf(&b, "     %s\n", h)
	}
	b.WriteString("   - At most 256 KiB.\n")
	b.WriteString("   - Under ## Environment facts, a line \"Secrets needed: NAME, NAME\" with the names of the secrets the work needs (never their values), or \"Secrets needed: none\".\n")
	b.WriteString("2. Commit nothing and push nothing: uncommitted and untracked files travel as they are.\n")
	fmt.Fprintf(&b, "3. Run: %s\n", run)
	if kind == "" {
		fmt.Fprintf(&b, "   KIND is the coding-agent CLI to continue in the box, one of: %s. Ask the user which, unless they said.\n", strings.Join(KindNames(), ", "))
	}
	b.WriteString("   Exit 4 lists warnings: show them to the user and run it again with --yes only if they agree.\n")
	b.WriteString("   Exit 3 means refused with nothing changed: show the message and its next step to the user.\n")
	fmt.Fprintf(&b, "4. Later, `%s` shows the box agent's progress, and `%s` brings its commits home.\n", cmd(Command{Verb: VerbInbox}), cmd(cmdBack))
	return b.String()
}
