package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/remote"
)

const gitRemoteProg = "git-remote-cocoonbox"

// GitRemote is git-remote-cocoonbox, git's remote helper for cocoonbox::
// URLs: args are git's (remote name and URL), without the program name.
// It returns 0, the service's exit status, or 1 after one line on stderr.
func GitRemote(args []string, env Env, s Streams) int {
	// git closing our stdout must be an EPIPE error, not a death by signal.
	signal.Ignore(syscall.SIGPIPE)
	fail := func(err error) int {
		fmt.Fprintf(s.Err, "%s: %s\n", gitRemoteProg, printable.Lines(err.Error(), maxLine))
		return ExitFailure
	}
	if isVersion(args, true) {
		return printVersion(s.Out, gitRemoteProg)
	}
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		fmt.Fprint(s.Out, gitRemotePage.Help())
		return ExitOK
	}
	if len(args) != 2 {
		return fail(errors.New("usage: git-remote-cocoonbox REMOTE URL; git runs it for cocoonbox:: URLs, as in git clone cocoonbox::main/app; see: git-remote-cocoonbox --help"))
	}
	var client *box.Client
	h := &remote.Helper{
		URL: args[1],
		Dial: func() (remote.Execer, error) {
			c, err := env.dial("")
			client = c
			return c, err
		},
		ProtocolVersion: func() (int, error) { return protocolVersion(env) },
		Stderr:          s.Err,
		Logf: func(format string, a ...any) {
			fmt.Fprintf(s.Err, gitRemoteProg+": "+format+"\n", a...)
		},
	}
	err := h.Run(context.Background(), s.In, s.Out)
	if client != nil {
		client.Close()
	}
	if err == nil {
		return ExitOK
	}
	if _, ok := errors.AsType[*box.WriteError](err); ok {
		// git has stopped reading: nobody is left to tell.
		return ExitFailure
	}
	if ee, ok := errors.AsType[*remote.ExitError](err); ok {
		if ee.Init != "" {
			fmt.Fprintf(s.Err, "%s: to create it: %s\n", gitRemoteProg, ee.Init)
		}
		if ee.Status.Error != "" || ee.Status.Signal != "" {
			return fail(ee)
		}
		return ee.Status.Code
	}
	return fail(err)
}

// protocolVersion is the user's protocol.version as git itself reads it
// (protocol.c get_protocol_version_config): git config, which sees -c
// overrides through GIT_CONFIG_PARAMETERS, then GIT_TEST_PROTOCOL_VERSION,
// then 2.
func protocolVersion(env Env) (int, error) {
	cmd := exec.Command("git", "config", "protocol.version")
	cmd.Env = env.Environ
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	v := strings.TrimSpace(string(out))
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ExitCode() == 1 {
		v = env.Getenv("GIT_TEST_PROTOCOL_VERSION")
		if v == "" {
			return 2, nil
		}
	} else if err != nil {
		return 0, fmt.Errorf("read protocol.version: git config: %v %s", err, strings.TrimSpace(stderr.String()))
	}
	switch v {
	case "0", "1", "2":
		return int(v[0] - '0'), nil
	}
	return 0, fmt.Errorf("unknown value for config 'protocol.version': %s", v)
}
