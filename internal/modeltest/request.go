package modeltest

import (
	"regexp"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// The requests of the commands cocoonbox setup installs (the Claude Code
// plugin's /cocoonbox:offload and /cocoonbox:back, Codex's skills
// $cocoonbox-offload and $cocoonbox-back) and of cocoonbox offload
// --handover-prompt: the model does
// what they say, as far as their text tells, so that a test sees whether
// that text is enough for a model to follow.

var (
	// offloadAskRE starts the hand-over request (offload.HandoverPrompt).
	offloadAskRE = regexp.MustCompile(`(?m)^Write a hand-over of the task you are working on`)
	// writeToRE is where the hand-over goes: a path, or the file a
	// backquoted command prints.
	writeToRE   = regexp.MustCompile(`(?m)^\d+\. Write the hand-over to (.+?) \(replace the template`)
	titleRE     = regexp.MustCompile(`The first line is "([^"]+)"`)
	headingRE   = regexp.MustCompile(`(?m)^\s+(## .+)$`)
	secretsRE   = regexp.MustCompile(`Under (## [^,]+), a line "Secrets needed: [^"]*"[^"]*"(Secrets needed: none)"`)
	runRE       = regexp.MustCompile(`(?m)^\d+\. Run: (.+)$`)
	wordsRE     = regexp.MustCompile(`(?s)Their words, if any: (.*?)\n\n`)
	otherKindRE = regexp.MustCompile(`If those words name another coding-agent CLI for the box \(([^)]*)\), use its name as --kind below instead of (\S+)\.`)
	// skillWordsRE says the words are the message that named the skill.
	skillWordsRE = regexp.MustCompile(`Their words, if any, are those of their message that named this skill`)
	mentionRE    = regexp.MustCompile(`\$[a-z][a-z0-9-]*`)
	// backAskRE is the back request: its first step runs the command in
	// backquotes.
	backAskRE = regexp.MustCompile("(?m)^1\\. Run `(cocoonbox back[^`]*)` in this repository")
	backquote = regexp.MustCompile("`([^`]+)`")
)

// requestPlan is the plan of a request of ours in text, and whether text
// is one. The user's words in it are the user's: their "model:" lines go
// into the hand-over's next steps, for the box agent, and are not this
// model's steps.
//
// A skill of Codex takes no arguments: its text says the user's words are
// those of the message that named it, the prompt before it (prompts is
// every prompt so far, text the last), less the $skill mention.
func requestPlan(text string, prompts []string) ([]string, bool) {
	if m := backAskRE.FindStringSubmatch(text); m != nil {
		return []string{longStep + m[1]}, true
	}
	if !offloadAskRE.MatchString(text) {
		return nil, false
	}
	words := ""
	if m := wordsRE.FindStringSubmatch(text); m != nil {
		words = strings.TrimSpace(m[1])
	} else if skillWordsRE.MatchString(text) && len(prompts) >= 2 {
		words = strings.TrimSpace(mentionRE.ReplaceAllString(prompts[len(prompts)-2], ""))
	}
	// The hand-over, from the rules the request gives.
	title := "# Hand-over: "
	if m := titleRE.FindStringSubmatch(text); m != nil {
		title = m[1]
	}
	task, _, _ := strings.Cut(words, "\n")
	if task = strings.TrimSpace(task); task == "" {
		task = "the scripted task"
	}
	var next []string
	for _, l := range strings.Split(words, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "model:") {
			next = append(next, l)
		}
	}
	var b strings.Builder
	b.WriteString(title + task + "\n")
	secrets := ""
	if m := secretsRE.FindStringSubmatch(text); m != nil {
		secrets = m[1]
	}
	for _, m := range headingRE.FindAllStringSubmatch(text, -1) {
		h := strings.TrimSpace(m[1])
		var body []string
		if h == "## Next steps" {
			body = next
		}
		if h == secrets {
			body = append(body, "Secrets needed: none")
		}
		if len(body) == 0 {
			body = []string{"none"}
		}
		b.WriteString(h + "\n" + strings.Join(body, "\n") + "\n")
	}
	to := ""
	if m := writeToRE.FindStringSubmatch(text); m != nil {
		if c := backquote.FindStringSubmatch(m[1]); c != nil {
			to = `"$(` + c[1] + `)"`
		} else {
			to = shellquote.Quote(m[1])
		}
	}
	var plan []string
	if to != "" {
		plan = append(plan, "printf '%s' "+shellquote.Quote(b.String())+" > "+to)
	}
	if m := runRE.FindStringSubmatch(text); m != nil {
		run := strings.TrimSpace(m[1])
		if k := otherKindRE.FindStringSubmatch(text); k != nil {
			for _, other := range strings.Split(k[1], ", ") {
				if strings.EqualFold(task, other) {
					run = strings.Replace(run, "--kind "+k[2], "--kind "+other, 1)
				}
			}
		}
		plan = append(plan, run)
	}
	return plan, true
}

// longStep starts a plan step whose command may run long: claude's Bash
// call asks for its longest timeout (600000 ms), as the back request
// tells the model to.
const longStep = "\x00long "

// shellStep is the command of a shell plan step, and whether it may run
// long.
func shellStep(cmd string) (string, bool) {
	c, long := strings.CutPrefix(cmd, longStep)
	return c, long
}
