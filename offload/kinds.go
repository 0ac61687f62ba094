package offload

import (
	"fmt"
	"slices"
	"strings"
)

// Kind is a coding-agent CLI that can run in a box (DESIGN.md "Offload
// and back").
type Kind struct {
	// Name is the --kind word: claude, codex or cursor.
	Name string
	// Title is the product's name for people.
	Title string
	// Install is the vendor's official installer as a person would type
	// it, for help and docs; Installer runs it step by step.
	Install string
	// InstallerURL is the vendor's installer script, when it has one
	// (fetched with curl and run with bash); Package is its npm package,
	// installed into ~/.local when there is no script or its host cannot
	// be reached. Binary is the command it installs.
	InstallerURL, Package, Binary string
	// Login is the vendor's sign-in, run in the box on a terminal.
	Login string
	// Hosts are the vendor's own hosts: a sign-in link is opened only on
	// one of them or a subdomain.
	Hosts []string
	// Unsupported, when not empty, is why the kind cannot be used yet:
	// every verb refuses it up front with this reason.
	Unsupported string
}

var kinds = []Kind{
	{
		Name:         "claude",
		Title:        "Claude Code",
		Install:      "curl -fsSL https://claude.ai/install.sh | bash",
		InstallerURL: "https://claude.ai/install.sh", Package: "@anthropic-ai/claude-code", Binary: "claude",
		Login: "claude auth login",
		Hosts: []string{"claude.ai", "claude.com", "anthropic.com"},
	},
	{
		Name:    "codex",
		Title:   "Codex CLI",
		Install: "npm install -g --prefix \"$HOME/.local\" @openai/codex",
		Package: "@openai/codex", Binary: "codex",
		Login: "codex login --device-auth",
		Hosts: []string{"openai.com", "chatgpt.com"},
	},
	{
		Name:         "cursor",
		Title:        "Cursor CLI",
		Install:      "curl -fsS https://cursor.com/install | bash",
		InstallerURL: "https://cursor.com/install", Binary: "cursor-agent",
		Login: "cursor-agent login",
		Hosts: []string{"cursor.com", "cursor.sh"},
		// The box agent checks cursor-agent in begin and then blocks it.
		Unsupported: "Cursor CLI sessions are not built into the box agent yet",
	},
}

// KindNames lists the names of the kinds that can be used.
func KindNames() []string {
	var n []string
	for _, k := range kinds {
		if k.Unsupported == "" {
			n = append(n, k.Name)
		}
	}
	return n
}

// LookupKind returns the kind named name, or an error: one listing the
// kinds, or for a kind not supported yet its reason.
func LookupKind(name string) (Kind, error) {
	i := slices.IndexFunc(kinds, func(k Kind) bool { return k.Name == name })
	if i < 0 {
		return Kind{}, fmt.Errorf("unknown kind %q: want %s", name, strings.Join(KindNames(), ", "))
	}
	if k := kinds[i]; k.Unsupported != "" {
		return Kind{}, fmt.Errorf("--kind %s is not supported yet: %s; use %s", name, k.Unsupported, strings.Join(KindNames(), " or "))
	}
	return kinds[i], nil
}

// KindOf is the kind named name, supported or not, or one titled by the
// name itself for a name that is no kind (a record from a newer version).
func KindOf(name string) Kind {
	if i := slices.IndexFunc(kinds, func(k Kind) bool { return k.Name == name }); i >= 0 {
		return kinds[i]
	}
	return Kind{Name: name, Title: name}
}

// Named is the CLI's name with the version its --version printed, once:
// "Claude Code 2.1.197" for "2.1.197 (Claude Code)", "Codex CLI 0.171.0"
// for "codex-cli 0.171.0". A version with no word that starts with a digit
// is kept whole; an empty one gives the title alone.
func (k Kind) Named(version string) string {
	f := strings.Fields(version)
	for _, w := range f {
		if w = strings.TrimPrefix(w, "v"); w != "" && w[0] >= '0' && w[0] <= '9' {
			return k.Title + " " + w
		}
	}
	if len(f) == 0 {
		return k.Title
	}
	return k.Title + " " + strings.Join(f, " ")
}
