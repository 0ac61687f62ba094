package cli

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/version"
	"github.com/cocoonbox/cocoonbox/shim"
)

// SSH is cocoonbox-ssh: args are ssh(1)'s, without the program name. It
// returns the remote command's exit status, or 255 for a failure of ours.
// With --stdio first it is instead an SSH server on its stdio, for ssh's
// ProxyCommand (sshStdio).
func SSH(args []string, env Env, s Streams) int {
	return sshAs("cocoonbox-ssh", args, env, s)
}

// sshAs is SSH under the name prog, which its own lines carry: the
// binary cocoonbox-ssh, or `cocoonbox ssh`, the same command line.
func sshAs(prog string, args []string, env Env, s Streams) int {
	if isVersion(args, false) {
		return printVersion(s.Out, prog)
	}
	if len(args) > 0 && args[0] == "--stdio" {
		return sshStdio(prog, args[1:], env, s)
	}
	return runShim(prog, args, env, s)
}

// shimArgv is the command line that runs prog with args again, for -f;
// nil when this executable cannot be found.
func shimArgv(prog string, args []string) []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	if sub, ok := strings.CutPrefix(prog, "cocoonbox "); ok {
		return append([]string{exe, sub}, args...)
	}
	return append([]string{exe}, args...)
}

func runShim(prog string, args []string, env Env, s Streams) int {
	// A closed stdout must be an EPIPE error we can answer with 255, not a
	// death by SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	// --help alone is ours: ssh has none (it calls it an unknown option).
	if len(args) == 1 && args[0] == "--help" {
		fmt.Fprint(s.Out, sshPage(prog).Help())
		return 0
	}
	o, err := shim.Parse(args)
	if err != nil {
		fmt.Fprintf(s.Err, "%s: %s\n", prog, printable.Line(err.Error(), maxLine))
		if ue, ok := errors.AsType[*shim.UsageError](err); ok && ue.Synopsis {
			fmt.Fprintf(s.Err, "%ssee: %s --help\n", sshPage(prog).Usage(), prog)
		}
		return shim.ExitFailure
	}
	return shim.Run(o, shim.Env{
		Argv:    shimArgv(prog, args),
		Prog:    prog,
		Version: fmt.Sprintf("%s %s, OpenSSH_9.2 command line", prog, version.String()),
		Stdin:   s.In,
		Stdout:  s.Out,
		Stderr:  s.Err,
		Environ: env.Environ,
		Dial: func() (*box.Client, error) {
			env.resumeWindow = o.ResumeWindow
			return env.dial("")
		},
	})
}
