package cli

import (
	"strconv"
	"strings"

	"github.com/cocoonbox/cocoonbox/localbox"
	"github.com/cocoonbox/cocoonbox/offload"
)

// stepVerbs are the command words of each command an offload next step
// names: the one place the remedies' command lines are spelled.
var stepVerbs = map[offload.Verb]string{
	offload.VerbOffload:        "cocoonbox offload",
	offload.VerbHandoverPrompt: "cocoonbox offload --handover-prompt",
	offload.VerbHandoverPath:   "cocoonbox offload handover-path",
	offload.VerbBack:           "cocoonbox back",
	offload.VerbAbandon:        "cocoonbox offload abandon",
	offload.VerbRestart:        "cocoonbox offload restart",
	offload.VerbInbox:          "cocoonbox offload inbox",
	offload.VerbStatus:         "cocoonbox offload status",
	offload.VerbSignIn:         "cocoonbox offload sign-in",
	offload.VerbInstallCLI:     "cocoonbox offload install-cli",
	offload.VerbSecretsAdd:     "cocoonbox offload secrets add",
	offload.VerbSecretsRemove:  "cocoonbox offload secrets remove",
	offload.VerbBoxes:          "cocoonbox boxes list",
	offload.VerbRsh:            "cocoonbox rsh",
	offload.VerbLocalbox:       "cocoonbox localbox status",
	offload.VerbLocalMove:      localbox.StateRecipe,
}

// commandLine is c as the user types it: its words, then --kind, --box
// (rsh's box is its first argument), --wait, --yes and --force, then its
// arguments.
func commandLine(c offload.Command) string {
	w := []string{stepVerbs[c.Verb]}
	if c.Kind != "" {
		w = append(w, "--kind", c.Kind)
	}
	if c.Terminal && c.Verb == offload.VerbRsh {
		w = append(w, "-t")
	}
	if c.Box != "" && c.Verb == offload.VerbRsh {
		w = append(w, c.Box)
	} else if c.Box != "" {
		w = append(w, "--box", c.Box)
	}
	if c.Wait != 0 {
		w = append(w, "--wait", strconv.Itoa(c.Wait))
	}
	if c.Yes {
		w = append(w, "--yes")
	}
	if c.Force {
		w = append(w, "--force")
	}
	return strings.Join(append(w, c.Args...), " ")
}

// stepLine is one next step as the line printed for it.
func stepLine(s offload.Step) string { return s.Text(commandLine) }
