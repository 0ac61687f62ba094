// Package agentwire is the wire between the two halves of offload: the
// JSON line each verb of `cocoonbox-agent offload <verb>` answers with,
// and env.json in the stream (contract "Verbs", "Environment";
// docs/cocoonbox-agent.md). The box half (boxagent) writes them and the
// laptop half (offload) reads them, both with these types, so a change to
// the wire is one change.
package agentwire

// Error codes of a verb's failure line, with the exit statuses the verbs
// give them.
const (
	CodeUsage   = "usage"   // exit 2: a bad flag or argument
	CodeRefused = "refused" // exit 3: refused, nothing changed
	CodeFailed  = "failed"  // exit 1: failed, rolled back as stated
	CodeInbox   = "inbox"   // exit 4: the inbox is not running
)

// Failure is a verb's answer when it fails: OK false, Code one of the
// Code* constants, Error one line; Findings and CLI come with a refused
// begin.
type Failure struct {
	OK       bool      `json:"ok"`
	Code     string    `json:"code"`
	Error    string    `json:"error"`
	Findings []Finding `json:"findings,omitempty"`
	CLI      *CLIInfo  `json:"cli,omitempty"`
}

// Finding is one preflight finding (contract "Preflight"): Check names
// it, Outcome is Block, Warn or Confirm, Detail says what was found.
type Finding struct {
	Check   string `json:"check"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// Finding outcomes.
const (
	Block   = "block"
	Warn    = "warn"
	Confirm = "confirm"
)

// CLIInfo is begin's cli field: what begin learned of the kind's CLI in
// the box. HooksBlocked is claude's only (absent for the other kinds): the
// first settings file that sets allowManagedHooksOnly or disableAllHooks,
// else empty.
type CLIInfo struct {
	Kind         string  `json:"kind"`
	Version      string  `json:"version"`
	SignedIn     bool    `json:"signed_in"`
	Account      string  `json:"account"`
	HooksBlocked *string `json:"hooks_blocked,omitempty"`
	// ByKey says the CLI is signed in with an API key, not an account;
	// KeySource is where the CLI says the key comes from, when it says.
	ByKey     bool   `json:"by_key,omitempty"`
	KeySource string `json:"key_source,omitempty"`
}

// BlockedBy is the settings file that turns the CLI's hooks off, or "".
func (c *CLIInfo) BlockedBy() string {
	if c == nil || c.HooksBlocked == nil {
		return ""
	}
	return *c.HooksBlocked
}

// BeginResult is begin's answer. Refs maps each ref of the copy to its
// object; Copy is the copy's state before begin (absent, mirror, …).
type BeginResult struct {
	OK       bool              `json:"ok"`
	Dir      string            `json:"dir"`
	Copy     string            `json:"copy"`
	Refs     map[string]string `json:"refs"`
	CLI      *CLIInfo          `json:"cli"`
	Ignored  []string          `json:"ignored"`
	Findings []Finding         `json:"findings"`
}

// SendResult is the answer of send with a stream. TimingsMS maps each
// step of send to its milliseconds.
type SendResult struct {
	OK        bool             `json:"ok"`
	Delivery  string           `json:"delivery"`
	Accepted  bool             `json:"accepted"`
	Tmux      string           `json:"tmux"`
	TimingsMS map[string]int64 `json:"timings_ms"`
	// Exited says the box CLI exited before it took the first prompt;
	// ExitLines are the last lines of its pane (box text: print it
	// through internal/printable).
	Exited    bool     `json:"exited,omitempty"`
	ExitLines []string `json:"exit_lines,omitempty"`
	// Screen is the pane's last lines when the CLI runs but has not taken
	// the first prompt: a first-run dialog may hold it (box text).
	Screen []string `json:"screen,omitempty"`
}

// SignInResult is sign-in's answer: the file that keeps the key (0600,
// in a directory others cannot enter), the settings file that points the
// CLI at it (claude's; "" for a CLI that keeps the key itself), and the
// CLI as its sign-in status reports it afterwards. Warning, when not
// empty, says the CLI does not use the key (the box's login environment
// sets one that wins).
type SignInResult struct {
	OK       bool     `json:"ok"`
	KeyFile  string   `json:"key_file"`
	Settings string   `json:"settings,omitempty"`
	CLI      *CLIInfo `json:"cli"`
	Warning  string   `json:"warning,omitempty"`
}

// RestartResult is restart's answer. Accepted, Exited and ExitLines are
// as SendResult's: whether the CLI started afresh took the prompt in
// time, or exited first with these last lines.
type RestartResult struct {
	OK        bool     `json:"ok"`
	Delivery  string   `json:"delivery"`
	Accepted  bool     `json:"accepted"`
	Exited    bool     `json:"exited,omitempty"`
	ExitLines []string `json:"exit_lines,omitempty"`
}

// MessageResult is the answer of send --message or --back: the message's
// inbox seq and how it went (started, pasted or queued).
type MessageResult struct {
	OK       bool   `json:"ok"`
	Seq      int    `json:"seq"`
	Delivery string `json:"delivery"`
}

// Entry is one outbox entry: a post of the box agent. Kind is progress,
// question or back, or EntryFault, the box's own entry for a Fault;
// TimeMS is the box's clock in Unix milliseconds.
type Entry struct {
	Seq       int    `json:"seq"`
	Kind      string `json:"kind"`
	OffloadID string `json:"offload_id"`
	CLI       string `json:"cli"`
	TimeMS    int64  `json:"time_ms"`
	Body      string `json:"body"`
}

// ReadResult is read's answer: the entries after the seq asked for, and
// the session's status.
type ReadResult struct {
	OK      bool    `json:"ok"`
	Entries []Entry `json:"entries"`
	Status  string  `json:"status"`
	// Fault is what went wrong with the session, beside its status: its
	// last turn failed, its CLI exited, or it waits at a dialog, its
	// sign-in screen or a stall; nil when nothing did.
	Fault *Fault `json:"fault,omitempty"`
}

// Session is one repo's box CLI session in status's answer. The *MS
// fields are the box's clock in Unix milliseconds, 0 when unknown.
type Session struct {
	Repo              string `json:"repo"`
	Name              string `json:"name"`
	CLI               string `json:"cli"`
	OffloadID         string `json:"offload_id"`
	Status            string `json:"status"`
	Copy              string `json:"copy"`
	TmuxAlive         bool   `json:"tmux_alive"`
	HookAtMS          int64  `json:"hook_at_ms"`
	HooksSilent       bool   `json:"hooks_silent"`
	TranscriptMtimeMS int64  `json:"transcript_mtime_ms"`
	WindowActivityMS  int64  `json:"window_activity_ms"`
	InboxSeq          int    `json:"inbox_seq"`
	OutboxSeq         int    `json:"outbox_seq"`
	// ExitLines are the pane's last lines when the CLI was found exited
	// (box text).
	ExitLines []string `json:"exit_lines,omitempty"`
	// Fault is what went wrong with the session, beside Status (which
	// stays one of the contract's states): its last turn failed, its CLI
	// exited, or it waits at a dialog, its sign-in screen or a stall; nil
	// when nothing did. A new turn clears a failed turn's; a wait's lasts
	// while the pane shows it.
	Fault *Fault `json:"fault,omitempty"`
}

// StatusResult is status's answer.
type StatusResult struct {
	OK       bool      `json:"ok"`
	Sessions []Session `json:"sessions"`
}

// OKResult is the answer of a verb that reports nothing more.
type OKResult struct {
	OK bool `json:"ok"`
}

// EndResult is end's answer: Copy is the copy's state after it.
type EndResult struct {
	OK   bool   `json:"ok"`
	Copy string `json:"copy"`
}

// Environment is env.json (contract "Environment"): the tool versions the
// repo asks for, read from its version files by the laptop, for the box's
// environment step.
type Environment struct {
	// V is the format version, 1.
	V int `json:"v"`
	// Tools maps a tool (go, rust, node, python, ...) to a version.
	Tools map[string]string `json:"tools"`
	// PackageManagers maps a package manager (pnpm, yarn, npm, ...) to a
	// version.
	PackageManagers map[string]string `json:"package_managers"`
	// Files are the version files read, relative to the top.
	Files []string `json:"files"`
	// Lockfiles are the lockfiles present, relative to the top.
	Lockfiles []string `json:"lockfiles"`
}

// PostResult is post's JSON line: Status is posted, or ready for back.
type PostResult struct {
	OK     bool   `json:"ok"`
	Seq    int    `json:"seq"`
	Status string `json:"status"`
}

// EnvResult is env's JSON line with --json; Report is null when no
// environment step ran.
type EnvResult struct {
	OK     bool       `json:"ok"`
	Report *EnvReport `json:"report"`
}

// EnvReport is a repo's environment report: per tool what is wanted and
// from where, what is installed, and its state; then each lockfile fetch.
type EnvReport struct {
	Done        bool         `json:"done"`
	StartedAtMS int64        `json:"started_at_ms"`
	EndedAtMS   int64        `json:"ended_at_ms,omitempty"`
	Tools       []ToolReport `json:"tools"`
	Lockfiles   []LockReport `json:"lockfiles"`
	Error       string       `json:"error,omitempty"`
}

// ToolReport is one tool of an EnvReport; State is ready, missing or
// failed.
type ToolReport struct {
	Tool      string `json:"tool"`
	Wanted    string `json:"wanted"`
	Source    string `json:"source"`
	Installed string `json:"installed"`
	State     string `json:"state"`
	Detail    string `json:"detail,omitempty"`
}

// LockReport is one lockfile fetch; State is done, failed or skipped.
type LockReport struct {
	File    string `json:"file"`
	Command string `json:"command"`
	State   string `json:"state"`
	Detail  string `json:"detail,omitempty"`
}
