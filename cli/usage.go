package cli

import (
	help "github.com/cocoonbox/cocoonbox/internal/usage"
	"github.com/cocoonbox/cocoonbox/shim"
)

// clientEnvironment is what every client binary reads (docs/cli.md).
var clientEnvironment = [][2]string{
	{"COCOONBOX_ENDPOINT", "the API endpoint; wins over the saved one"},
	{"COCOONBOX_TOKEN", "the token; wins over the saved one (never an argument)"},
	{"COCOONBOX_KEEPALIVE", "INTERVAL,TIMEOUT of the keepalive (default 30s,15s)"},
}

// sshPage is cocoonbox-ssh's help and man page.
func sshPage(prog string) help.Page {
	return help.Page{
		Name:     prog,
		Short:    "an ssh drop-in that runs commands in a cocoonbox box",
		Synopsis: shim.Synopsis(prog),
		Description: []string{
			"cocoonbox-ssh takes OpenSSH 9.2's command line and runs the command in BOX through the cocoonbox API, " +
				"with ssh's semantics: the words are joined with single spaces and run by the box user's shell in the " +
				"workspace, stdout and stderr stay apart, a terminal is allocated as ssh would (-t, -T), and ~. disconnects. " +
				"It is for tools that run ssh: rsync -e cocoonbox-ssh, GIT_SSH=cocoonbox-ssh, scp -S cocoonbox-ssh, " +
				"sftp -S cocoonbox-ssh, BORG_RSH=cocoonbox-ssh. cocoonbox ssh takes the same command line (and so does cocoonbox rsh).",
			"The host word is [user@]BOX, BOX.cocoonbox or ssh://[user@]BOX[:port][/]; the user and the port are accepted " +
				"and shown by -G. Options may follow the host word up to the first command word, unless -- came first. " +
				"-o takes ssh_config keywords; those a box cannot honour are accepted and ignored as ssh ignores them " +
				"for a host that does not need them. -L and -D listen here and connect from inside the box; -R listens " +
				"in the box and connects from here; -A gives the box SSH_AUTH_SOCK, a socket that reaches the local " +
				"ssh-agent (git push to GitHub from the box with the keys of this machine). Options that would do what " +
				"a box cannot (-J, -O, -Q, -w) are refused in one line with exit status 255. -f goes to the background " +
				"once the forwards listen and the command has started, as ssh's does. Unless COCOONBOX_RESUME=off, " +
				"a shell on a terminal outlives its client (killed, its terminal closed; ~. or exit ends it): " +
				"cocoonbox rsh --attach takes it back.",
			prog + " --stdio [--suffix SUFFIX] [-q] [-v] HOST is instead an SSH-2 server on stdin and stdout, for " +
				"ssh_config's ProxyCommand (ProxyCommand cocoonbox-ssh --stdio %h), so that OpenSSH itself, scp, sftp, " +
				"VS Code Remote-SSH and Paramiko reach the box HOST (without SUFFIX, .cocoonbox by default) with the same " +
				"semantics; cocoonbox ssh-config writes the Host block that uses it. It exits 0 once the client has gone.",
		},
		Exit:        "the remote command's status, or 255 for a failure of cocoonbox-ssh or the connection, as ssh.",
		Environment: clientEnvironment,
		SeeAlso:     []string{"ssh(1)", "cocoonbox(1)", "git-remote-cocoonbox(1)"},
	}
}

// gitRemotePage is git-remote-cocoonbox's help and man page.
var gitRemotePage = help.Page{
	Name:     gitRemoteProg,
	Short:    "git's remote helper for cocoonbox::BOX/PATH URLs",
	Synopsis: []string{gitRemoteProg + " REMOTE URL", gitRemoteProg + " --version | -V"},
	Description: []string{
		"git runs git-remote-cocoonbox by itself for a URL that starts with cocoonbox:: or cocoonbox://, once it is on " +
			"the PATH: git clone cocoonbox::main/app, git fetch, pull, push, ls-remote and archive --remote all work " +
			"through it, with the box's own git-upload-pack, git-receive-pack and git-upload-archive.",
		"URLs: cocoonbox::BOX/PATH (PATH in the box's workspace), cocoonbox::BOX:/ABS/PATH (an absolute path), " +
			"cocoonbox::BOX:~/PATH (in the box user's home), and the same after cocoonbox://. " +
			"A repository that is not there is named with the command that creates it.",
	},
	Exit:        "0, the box's git status, or 1 after one line on stderr.",
	Environment: clientEnvironment,
	SeeAlso:     []string{"git(1)", "gitremote-helpers(7)", "cocoonbox(1)", "cocoonbox-ssh(1)"},
}
