package cli

// The exit statuses of cocoonbox and git-remote-cocoonbox: this one table
// (docs/cli.md "Exit status"). cocoonbox-agent's are boxagent.Error's
// ExitCode, the same numbers for the same meanings, 4 being its inbox not
// running. `cocoonbox rsh` and cocoonbox-ssh pass the remote command's
// status through and exit shim.ExitFailure (255) for a failure of their
// own, as ssh does. offload's ExitFailed, ExitRefused
// and ExitConfirm are the codes an offload.Error carries to here, and
// equal ExitFailure, ExitRefused and ExitNeedsYes (TestExitTable).
const (
	// ExitOK is success, and --help.
	ExitOK = 0
	// ExitFailure is a failure, reported in one message on stderr.
	ExitFailure = 1
	// ExitUsage is a bad flag or argument, or an unknown subcommand.
	ExitUsage = 2
	// ExitRefused is a command refused before it changed anything:
	// offload's refusals, and a command this platform cannot run.
	ExitRefused = 3
	// ExitNeedsYes is a command that would lose data, or go on past a
	// warning, and was not given --yes (boxes delete, localbox account
	// remove, offload's preflight warnings); nothing changed.
	ExitNeedsYes = 4
	// ExitSignal plus N is the status of a command that signal N stopped
	// (Ctrl-C, SIGINT: 130; SIGTERM: 143), as a shell reports one.
	ExitSignal = 128
)
