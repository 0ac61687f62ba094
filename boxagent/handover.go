package boxagent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// HandoverTemplate is the hand-over template, as the first prompt gives it
// to the box agent.
const HandoverTemplate = `# Hand-over: <the task in one line>

## Goal and definition of done
<what done looks like, and how to check it>

## User preferences and constraints
<what the user asked for or ruled out; none if none>

## Current state
<what works, what does not, what is half done>

## Decisions made
<each decision and why>

## Files touched
<paths, one a line>

## Next steps
<in order>

## Commands
<build, test and run commands that work here>

## Environment facts
<versions, services, variables that matter>

## Gotchas learned
<what cost time>

## Open questions
<for the user; none if none>
`

// promptInput is what the first prompt is composed from.
type promptInput struct {
	Dir         string // the copy
	HandoverOut string // where the box agent writes its hand-over
	Base        string // S
	Branch      string
	Status      string // git status --short
	Log         string // git log --oneline @{upstream}..HEAD, else the last 5
	MacOnly     []string
	Env         []byte // env.json
	Handover    []byte
	Restart     bool
}

// composePrompt is the first prompt (contract "First prompt"): the
// preamble, the hand-over, and what the packer attached.
func composePrompt(p promptInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, `You are running in the user's cocoonbox box, in %s, continuing a task the user's own coding agent handed over. The user is away and nobody answers prompts: decide, note the decision, and go on.

- Run `+"`cocoonbox-agent offload env`"+` first: it waits for the environment step (tool versions, dependency fetches) and says what is ready.
- HTTP_PROXY and HTTPS_PROXY may be set; they can break tests that read them.
- Before blaming your change for a failure, compare against the starting point %s (git stash, or a git worktree at it).
- Commit as you go, with clear messages. Never push.
- Report with `+"`cocoonbox-agent offload post`"+`: --progress at milestones, --question when only the user can decide, --back when the task is done. Write your hand-over to %s first and send it with `+"`cocoonbox-agent offload post --progress < %s`"+` (or --back); post refuses a hand-over without every heading.

The hand-over template:

%s`, p.Dir, short(p.Base), p.HandoverOut, shellquote.Quote(p.HandoverOut), HandoverTemplate)
	if p.Restart {
		b.WriteString("\nThis session was restarted; the hand-over below is the last one written.\n")
	}
	b.WriteString("\n---\n\n")
	b.Write(bytes.TrimSpace(p.Handover))
	b.WriteString("\n\n---\n\n## Attached by the packer\n\n")
	if p.Branch != "" || p.Base != "" {
		fmt.Fprintf(&b, "Branch: %s; starting point S: %s\n\n", orNone(p.Branch), orNone(p.Base))
	}
	fmt.Fprintf(&b, "git status --short:\n\n%s\n\n", indent(orNone(p.Status)))
	fmt.Fprintf(&b, "Commits:\n\n%s\n\n", indent(orNone(p.Log)))
	if len(p.MacOnly) > 0 {
		fmt.Fprintf(&b, "Mac-only settings in .git/config (they do nothing here):\n\n%s\n\n", indent(strings.Join(p.MacOnly, "\n")))
	}
	fmt.Fprintf(&b, "Environment (env.json): %s\n", envShort(p.Env))
	return b.String()
}

// backInstruction is the text a BACK delivers, before the user's own.
func backInstruction(handoverOut string, extra string) string {
	s := "BACK: the user is taking this task back now. Stop at a safe point, commit your work (never push), write your hand-over to " +
		handoverOut + " with every heading of the template, then run: cocoonbox-agent offload post --back < " + shellquote.Quote(handoverOut)
	if extra = strings.TrimSpace(extra); extra != "" {
		s += "\n\n" + extra
	}
	return s
}

// envShort is env.json in one line: tools and versions, lockfiles.
func envShort(b []byte) string {
	var e agentwire.Environment
	if len(b) == 0 || json.Unmarshal(b, &e) != nil {
		return "none"
	}
	var parts []string
	for _, m := range []map[string]string{e.Tools, e.PackageManagers} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, k+" "+m[k])
		}
	}
	if len(e.Lockfiles) > 0 {
		parts = append(parts, "lockfiles "+strings.Join(e.Lockfiles, ", "))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func short(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return orNone(oid)
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "none"
	}
	return strings.TrimRight(s, "\n")
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
