package agentwire

import (
	"slices"
	"strings"
)

// Kind is a coding-agent CLI that offload can run in a box (DESIGN.md
// "Offload and back"): what both halves need to know of it. Each kind is
// one file of this package (claude.go, codex.go, cursor.go); a new CLI is
// one more, listed in Kinds. The laptop half uses the names, installer
// and sign-in; the box half the probes, the command line, the hooks, the
// trust preset and the transcripts. No method does I/O.
type Kind interface {
	// Name is the --kind word: claude, codex or cursor.
	Name() string
	// Title is the product's name for people: Claude Code.
	Title() string
	// Binary is the command the CLI runs as on the box's login PATH.
	Binary() string
	// Unsupported is why the kind cannot be used yet, or "": every verb
	// refuses such a kind up front with this reason.
	Unsupported() string
	// Install is how the vendor's CLI is installed in a box.
	Install() Install
	// Login is the vendor's sign-in, run in the box on a terminal.
	Login() string
	// Hosts are the vendor's own hosts: a sign-in link is opened only on
	// one of them or a subdomain.
	Hosts() []string

	// SignInStatus is the shell command whose exit status (0 signed in)
	// and output tell whether the CLI is signed in in the box.
	SignInStatus() string
	// ReadSignIn reads what SignInStatus printed (its exit status is the
	// caller's).
	ReadSignIn(out string) SignInState
	// KeySignIn is how the CLI is signed in with an API key in the box
	// (home is the box user's); the zero KeySignIn for none.
	KeySignIn(home string) KeySignIn
	// HookSettings are the settings files, in the CLI's order, that can
	// turn its hooks off (home is the box user's); nil for a kind whose
	// hooks no settings file can turn off.
	HookSettings(home string) []string
	// Launch is the command line that starts the CLI on its first
	// prompt, with the settings file to write at l.SettingsPath first
	// (nil for none).
	Launch(l Launch) (line string, settings []byte)
	// Hooks maps each hook the CLI runs (event --hook NAME) to what it
	// says of the session; "exit" is the line the login shell runs after
	// the CLI.
	Hooks() map[string]Hook
	// ExitCommand is what, typed at its prompt, ends the CLI.
	ExitCommand() string
	// APIKeyVar is the environment variable of the vendor's API key
	// whose tail Trust records as approved, or "".
	APIKeyVar() string
	// TrustFile is the CLI's config file (home is the box user's) that
	// Trust changes; "" when the CLI has no trust dialog to preset.
	TrustFile(home string) string
	// Trust returns config, the contents of TrustFile (nil when there is
	// none), with dir marked trusted, so that no trust dialog holds the
	// first prompt, and nothing else changed. keyTail is the last 20
	// characters of the API key of the box's login environment, or "".
	// perm is the mode to write a new file with, or 0 to keep the file's
	// own (0600 when new). An error says config is unusable, naming path.
	Trust(config []byte, path, dir, keyTail string) (out []byte, perm uint32, err error)
	// TranscriptDir is where the CLI keeps the transcripts of a session
	// in work directory dir (home is the box user's); "" for none.
	TranscriptDir(home, dir string) string

	// ReadFailure is the kind's failure reading (one more file of the
	// kind, <kind>_failure.go): a failed turn read from what the CLI
	// left, the payload of its hook named hook, or with hook "" the tail
	// of its session log (a transcript under TranscriptDir; nil when
	// none). It returns what the CLI said of the failure, one line or
	// more (the caller makes it one line), and when the log says it
	// happened (Unix ms; 0 when it does not say); ok is false when the
	// turn did not fail, or the log says nothing of it.
	ReadFailure(hook string, payload, log []byte) (line string, atMS int64, ok bool)
	// OwnsLog reports whether a session log under TranscriptDir whose
	// first line is head is of a session in work directory dir.
	OwnsLog(head []byte, dir string) bool
	// ReadScreen reads the last lines of the CLI's pane for a wait only a
	// person ends: FaultDialog, FaultLogin or FaultStalled, with the
	// pane's line that says it; "" when the pane shows none.
	ReadScreen(lines []string) (kind, line string)
	// RefusedRoot reports whether the last lines of the pane of a CLI
	// that exited before its first prompt are its refusal to run as
	// root.
	RefusedRoot(lines []string) bool
}

// SignInState is what a kind's sign-in status printed, as ReadSignIn reads it.
type SignInState struct {
	// SignedIn is nil when the output says nothing beyond the exit status.
	SignedIn *bool
	// Account is an email address, or "".
	Account string
	// ByKey says the CLI is signed in with an API key, not an account.
	ByKey bool
	// KeySource is where the CLI says its key comes from (claude's
	// apiKeySource: apiKeyHelper, ANTHROPIC_API_KEY), or "".
	KeySource string
}

// KeySignIn is how a kind's CLI is signed in with an API key in a box
// (`cocoonbox-agent offload sign-in --with-api-key`): the CLI's own
// command keeps the key (Command), or the box agent keeps it in a file of
// its own and points the CLI's settings at a helper that prints it
// (Helper). Exactly one of Command and Helper is set, or neither for a
// kind without sign-in by key.
type KeySignIn struct {
	// Command is the CLI's own sign-in by key: a login-shell command line
	// that reads the key on its stdin and keeps it in File (`codex login
	// --with-api-key`).
	Command string
	// File is where Command keeps the key. The box agent removes a
	// symbolic link there first, so that Command never writes through one.
	File string
	// Settings is the settings file Helper changes.
	Settings string
	// Helper returns settings, the content of Settings (nil when there is
	// none), with the CLI set to get its key from the shell command line
	// helper and nothing else changed; an error says settings is
	// unusable, naming path.
	Helper func(settings []byte, path, helper string) ([]byte, error)
	// Source is the KeySource the CLI reports once it uses the helper's
	// key ("apiKeyHelper"); another says the box's environment wins.
	Source string
}

// Install is how a kind's CLI is installed in a box.
type Install struct {
	// Command is the vendor's official installer as a person would type
	// it, for help and docs.
	Command string
	// ScriptURL is the vendor's installer script, when it has one
	// (fetched with curl and run with bash); Package is its npm package,
	// installed into ~/.local when there is no script or its host cannot
	// be reached.
	ScriptURL, Package string
}

// Launch is what a kind's command line is made of.
type Launch struct {
	// Agent is how the CLI's hooks run cocoonbox-agent.
	Agent string
	// Repo is the repo key, for the hooks' event lines.
	Repo string
	// PromptPath is the file holding the first prompt.
	PromptPath string
	// SettingsPath is where the settings Launch returns are written.
	SettingsPath string
	// Quote quotes a word for the box user's shell.
	Quote func(string) string
}

// Hook is what one of a CLI's hooks says of its session.
type Hook struct {
	// Turn is the change it reports.
	Turn Turn
	// Thread says the hook's payload names the CLI's thread, and only the
	// session's own thread's hooks count (codex also notifies for
	// threads of its own).
	Thread bool
	// Failed says the turn the hook ends failed (claude's StopFailure):
	// ReadFailure reads its payload.
	Failed bool
}

// Turn is a change a hook reports.
type Turn int

// The changes a hook reports.
const (
	// TurnStart: the CLI took a prompt and works (claude's
	// UserPromptSubmit); a kind with such a hook confirms pastes.
	TurnStart Turn = iota + 1
	// TurnEnd: the CLI's turn ended, it is at its prompt.
	TurnEnd
	// TurnWaiting: the CLI waits for the user (a dialog).
	TurnWaiting
	// TurnSessionEnd: the CLI's session ended (unless for a clear).
	TurnSessionEnd
	// TurnExited: the CLI's process has exited.
	TurnExited
)

// Kinds lists every kind, supported or not.
func Kinds() []Kind { return []Kind{claudeKind, codexKind, cursorKind} }

// KindNamed is the kind whose Name is name, supported or not, or nil.
func KindNamed(name string) Kind {
	for _, k := range Kinds() {
		if k.Name() == name {
			return k
		}
	}
	return nil
}

// KindOf is the kind named name, supported or not; for a name that is
// no kind (a record of a newer version), one titled by the name itself,
// unsupported, that runs no session.
func KindOf(name string) Kind {
	if k := KindNamed(name); k != nil {
		return k
	}
	return unknownKind{facts: facts{name: name, title: name, binary: name, unsupported: "unknown kind " + name, exit: "/exit"}}
}

// KindNames lists the names of every kind, supported or not.
func KindNames() []string {
	var n []string
	for _, k := range Kinds() {
		n = append(n, k.Name())
	}
	return n
}

// OrList is words as a choice in prose: "a", "a or b", "a, b or c"; ""
// for none. Help and errors that list the kinds or the verbs use it.
func OrList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// Named is the kind's title with the version its --version printed,
// once: "Claude Code 2.1.197" for "2.1.197 (Claude Code)", "Codex CLI
// 0.171.0" for "codex-cli 0.171.0". A version with no word that starts
// with a digit is kept whole; an empty one gives the title alone.
func Named(k Kind, version string) string {
	f := strings.Fields(version)
	for _, w := range f {
		if w = strings.TrimPrefix(w, "v"); w != "" && w[0] >= '0' && w[0] <= '9' {
			return k.Title() + " " + w
		}
	}
	if len(f) == 0 {
		return k.Title()
	}
	return k.Title() + " " + strings.Join(f, " ")
}

// ConfirmsPaste reports whether k has a hook that says it took a
// prompt, so that a paste no such hook follows can be sent again.
func ConfirmsPaste(k Kind) bool {
	for _, h := range k.Hooks() {
		if h.Turn == TurnStart {
			return true
		}
	}
	return false
}

// EventLine is the command line of a hook that runs `event --hook hook`
// for kind's session of repo, agent being how it runs cocoonbox-agent.
func EventLine(agent, repo, kind, hook string) string {
	return strings.Join(eventArgv(agent, repo, kind, hook), " ")
}

// eventArgv is EventLine as words.
func eventArgv(agent, repo, kind, hook string) []string {
	return append([]string{agent}, Event.Argv(EventRequest{Repo: repo, CLI: kind, Hook: hook})...)
}

// facts are the fixed facts of a kind, behind the Kind methods that
// only return them.
type facts struct {
	name, title, binary, unsupported string
	install                          Install
	login                            string
	hosts                            []string
	status, exit, apiKeyVar          string
}

func (f facts) Name() string         { return f.name }
func (f facts) Title() string        { return f.title }
func (f facts) Binary() string       { return f.binary }
func (f facts) Unsupported() string  { return f.unsupported }
func (f facts) Install() Install     { return f.install }
func (f facts) Login() string        { return f.login }
func (f facts) Hosts() []string      { return slices.Clone(f.hosts) }
func (f facts) SignInStatus() string { return f.status }
func (f facts) ExitCommand() string  { return f.exit }
func (f facts) APIKeyVar() string    { return f.apiKeyVar }

// noSession is the box half of a kind that runs no session: no hooks,
// no trust preset, no transcripts.
type noSession struct{}

func (noSession) ReadSignIn(string) SignInState  { return SignInState{} }
func (noSession) KeySignIn(string) KeySignIn     { return KeySignIn{} }
func (noSession) HookSettings(string) []string   { return nil }
func (noSession) Hooks() map[string]Hook         { return nil }
func (noSession) Launch(Launch) (string, []byte) { return "", nil }
func (noSession) TrustFile(string) string        { return "" }
func (noSession) TranscriptDir(string, string) string {
	return ""
}
func (noSession) ReadFailure(string, []byte, []byte) (string, int64, bool) { return "", 0, false }
func (noSession) OwnsLog([]byte, string) bool                              { return false }
func (noSession) ReadScreen([]string) (string, string)                     { return "", "" }
func (noSession) RefusedRoot([]string) bool                                { return false }
func (noSession) Trust([]byte, string, string, string) ([]byte, uint32, error) {
	return nil, 0, nil
}

// unknownKind is KindOf's kind for a name that is no kind.
type unknownKind struct {
	facts
	noSession
}
