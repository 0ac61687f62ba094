// Package boxagent is the box half of offload: the verbs of
// `cocoonbox-agent offload <verb>` and the inbox they talk to, as the
// contract's "Offload (design §27)" states them (seeds/001). A laptop runs
// the verbs through `cocoonbox rsh`; the box CLI's hooks run `event`; the
// box agent itself runs `post` and `env`. The inbox (`serve`) owns the box
// CLI sessions in tmux.
//
// The package never prints: verbs return a result or an *Error, progress
// goes to Config.Logf, and the cli package writes the one JSON line.
package boxagent

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/printable"
)

// Error is a verb's failure: Code is one of the Code* constants. Findings
// and CLI are set on a refused begin.
type Error struct {
	Code     string
	Err      error
	Findings []agentwire.Finding
	CLI      *agentwire.CLIInfo
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the process exit status for the error's code: usage 2,
// refused 3, inbox 4, anything else 1.
func (e *Error) ExitCode() int {
	switch e.Code {
	case agentwire.CodeUsage:
		return 2
	case agentwire.CodeRefused:
		return 3
	case agentwire.CodeInbox:
		return 4
	}
	return 1
}

func usagef(format string, a ...any) *Error {
	return &Error{Code: agentwire.CodeUsage, Err: fmt.Errorf(format, a...)}
}

func refusedf(format string, a ...any) *Error {
	return &Error{Code: agentwire.CodeRefused, Err: fmt.Errorf(format, a...)}
}

func failedf(format string, a ...any) *Error {
	return &Error{Code: agentwire.CodeFailed, Err: fmt.Errorf(format, a...)}
}

// asError makes err an *Error, code failed unless it is one already.
func asError(err error) *Error {
	if err == nil {
		return nil
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	return &Error{Code: agentwire.CodeFailed, Err: err}
}

// Config is where the box half finds things. In a real box Home is
// /home/user, Workspace /workspace and RunDir /run; the local box maps them
// under the box's directory (docs/cocoonbox-agent.md).
type Config struct {
	// Home is the box user's home ($HOME): the offload directory is
	// Home/.local/share/cocoonbox/offload.
	Home string
	// Workspace holds the copies: Workspace/<name> ($COCOONBOX_WORKDIR,
	// default /workspace).
	Workspace string
	// RunDir is the runtime directory ($COCOONBOX_RUN_DIR, default /run):
	// the inbox socket is RunDir/cocoonbox/offload.sock, the secrets
	// RunDir/cocoonbox-offload/secrets/<repo key>.
	RunDir string
	// Shell is the box user's login shell ($SHELL, default /bin/sh); tools
	// are looked up on its PATH with -lc, as a user's terminal would.
	Shell string
	// Self is the path of the cocoonbox-agent binary, for the CLI's hooks.
	Self string
	// Environ is the environment children get.
	Environ []string
	// Logf, if not nil, receives progress for a human (stderr). Never a
	// secret or a message body.
	Logf func(format string, args ...any)
	// AtStep, if not nil, is called with the verb and the step once the
	// journal names a step of send, before it runs: the place of the
	// test hook COCOONBOX_TEST_KILL_AT (docs/cli.md).
	AtStep func(verb, step string)
}

// logf gives Logf one line, escaped: its fields come from the box's
// records (a repository's name, a session's), which the box user can
// write, and must not forge a line of the log the inbox writes to.
func (c *Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf("%s", printable.Line(fmt.Sprintf(format, args...), 0))
	}
}

// OffloadDir is the box's offload directory (contract "Directories", box
// rows): index.json, excludes, and one directory per repo key.
func (c *Config) OffloadDir() string {
	return filepath.Join(c.Home, ".local", "share", "cocoonbox", "offload")
}

// SocketPath is the inbox's unix socket.
func (c *Config) SocketPath() string { return filepath.Join(c.RunDir, "cocoonbox", "offload.sock") }

// SecretsDir is where repo key k's secrets live: 0600 files in a 0700
// directory that no state layer saves.
func (c *Config) SecretsDir(k string) string {
	return filepath.Join(c.RunDir, "cocoonbox-offload", "secrets", k)
}

func (c *Config) repoDir(k string) string    { return filepath.Join(c.OffloadDir(), k) }
func (c *Config) copyDir(name string) string { return filepath.Join(c.Workspace, name) }
func (c *Config) stageDir(k string) string   { return filepath.Join(c.repoDir(k), "stage") }

// Session statuses (contract "Box CLI in tmux").
const (
	StatusWorking = "working"
	StatusIdle    = "idle"
	StatusBlocked = "blocked"
	StatusWaiting = "waiting_for_user"
	StatusStopped = "stopped"
)

// Copy states (contract "Copy states").
const (
	CopyAbsent     = "absent"
	CopyMirror     = "mirror"
	CopyUnreturned = "unreturned"
	CopyBusy       = "busy"
)

// MaxSessions is how many sessions of a box may be not stopped at once.
const MaxSessions = 3

var (
	keyRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`) })
	nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$`) })
)

// ValidRepoKey reports whether k can be a repo key: 1 to 64 of A-Z, a-z,
// 0-9, '_' and '-', starting with a letter or digit. It names directories
// and the tmux session, so nothing else is allowed.
func ValidRepoKey(k string) bool { return keyRE().MatchString(k) }

// ValidName reports whether n can name a copy under the workspace: 1 to
// 100 of A-Z, a-z, 0-9, '_', '-' and '.', not starting with '.'.
func ValidName(n string) bool { return nameRE().MatchString(n) }

// ValidID reports whether id can be an offload id (it names
// refs/cocoonbox/offload/<id>): the same alphabet as a repo key.
func ValidID(id string) bool { return keyRE().MatchString(id) }

func checkKey(k string) error { return checkWord("--repo", "repo key", k, ValidRepoKey) }

func checkID(id string) error { return checkWord("--id", "offload id", id, ValidID) }

// checkWord checks flag's value v, a word of keyRE's alphabet that valid
// accepts.
func checkWord(flag, what, v string, valid func(string) bool) error {
	if v == "" {
		return usagef("%s is required (the %s)", flag, what)
	}
	if !valid(v) {
		return usagef("bad %s %q: use 1 to 64 of A-Z, a-z, 0-9, _ and -", what, v)
	}
	return nil
}

func checkKind(kind string) error {
	want := agentwire.OrList(agentwire.KindNames())
	switch {
	case kind == "":
		return usagef("--kind is required: %s", want)
	case agentwire.KindNamed(kind) == nil:
		return usagef("bad kind %q: want %s", kind, want)
	}
	return nil
}

func nowMS() int64 { return time.Now().UnixMilli() }

// SessionName is the tmux session of repo key k's CLI of kind.
func SessionName(k, kind string) string { return agentwire.TmuxSession(k, kind) }
