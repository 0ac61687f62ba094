package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"

	"github.com/cocoonbox/cocoonbox/box"
)

// ExitFailure is ssh's status for any failure of its own (ssh(1) EXIT
// STATUS), and ours for a remote command killed by a signal, as ssh's.
const ExitFailure = 255

// Env is what Run needs from its process.
type Env struct {
	// Prog prefixes our messages, such as "cocoonbox-ssh".
	Prog string
	// Stdin, Stdout and Stderr are the process's streams.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Environ is the local environment, for -o SendEnv.
	Environ []string
	// Dial makes the client; it is called once, after the command line is
	// known to be good.
	Dial func() (*box.Client, error)
}

// Run runs the command o describes and returns the exit status ssh would:
// the remote command's, or 255 for a failure of ours with one line on
// stderr.
func Run(o *Options, env Env) int {
	if o.TTY == TTYWanted || o.TTY == TTYForced {
		return env.fail(errors.New("terminal mode (-t) is not supported yet; use -T"))
	}
	c, err := env.Dial()
	if err != nil {
		return env.fail(err)
	}
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := &box.Command{
		Box:      o.Box,
		Line:     o.Line(),
		Env:      o.remoteEnv(env.Environ),
		Stdin:    env.Stdin,
		Stdout:   env.Stdout,
		Stderr:   env.Stderr,
		Progress: env.Stderr,
	}
	if o.NoStdin {
		cmd.Stdin = nil
	}
	if o.Quiet {
		cmd.Progress = nil
	}
	signals := make(chan string, 1)
	cmd.Signals = signals
	done := make(chan int, 1)
	go forwardSignals(ctx, signals, done)

	type result struct {
		st  box.ExitStatus
		err error
	}
	res := make(chan result, 1)
	go func() {
		st, err := c.Exec(ctx, cmd)
		res <- result{st, err}
	}()
	var r result
	select {
	case r = <-res:
	case code := <-done:
		return code
	}
	if r.err != nil {
		var we *box.WriteError
		if errors.As(r.err, &we) {
			// Our reader has gone (EPIPE): ssh exits 255 without a word.
			return ExitFailure
		}
		return env.fail(r.err)
	}
	if r.st.Error != "" {
		return env.fail(fmt.Errorf("box %s: %s", o.Box, r.st.Error))
	}
	if r.st.Signal != "" {
		return ExitFailure
	}
	return r.st.Code
}

// forwardSignals forwards the first INT, TERM or HUP to the remote command
// and ends the call with 255 on a second one.
func forwardSignals(ctx context.Context, to chan<- string, done chan<- int) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(ch)
	sent := false
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-ch:
			if sent {
				done <- ExitFailure
				return
			}
			sent = true
			var name string
			switch s {
			case syscall.SIGINT:
				name = "INT"
			case syscall.SIGTERM:
				name = "TERM"
			case syscall.SIGHUP:
				name = "HUP"
			}
			select {
			case to <- name:
			default:
			}
		}
	}
}

// remoteEnv is what -o SendEnv and -o SetEnv send; nothing else of the
// local environment reaches the box.
func (o *Options) remoteEnv(environ []string) map[string]string {
	env := map[string]string{}
	for _, v := range o.Config["sendenv"] {
		for _, pat := range strings.Fields(v) {
			for _, kv := range environ {
				k, val, _ := strings.Cut(kv, "=")
				if ok, _ := path.Match(pat, k); ok {
					env[k] = val
				}
			}
		}
	}
	for _, v := range o.Config["setenv"] {
		for _, kv := range strings.Fields(v) {
			if k, val, ok := strings.Cut(kv, "="); ok && k != "" {
				env[k] = val
			}
		}
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

func (e Env) fail(err error) int {
	fmt.Fprintf(e.Stderr, "%s: %v\n", e.Prog, err)
	return ExitFailure
}
