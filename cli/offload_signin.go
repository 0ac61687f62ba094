package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/term"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
	"github.com/cocoonbox/cocoonbox/offload"
	"github.com/cocoonbox/cocoonbox/shim"
)

// signalExitContext is a context cancelled by the first INT or TERM, and
// a func that tells the exit status the signal calls for, 128+N
// (docs/cli.md), or 0 before any.
func signalExitContext() (context.Context, context.CancelFunc, func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	var mu sync.Mutex
	code := 0
	go func() {
		select {
		case sig := <-ch:
			mu.Lock()
			if n, ok := sig.(syscall.Signal); ok {
				code = ExitSignal + int(n)
			} else {
				code = ExitSignal + int(syscall.SIGINT)
			}
			mu.Unlock()
			cancel()
		case <-ctx.Done():
		}
	}()
	stop := func() { signal.Stop(ch); cancel() }
	return ctx, stop, func() int { mu.Lock(); defer mu.Unlock(); return code }
}

// signalled is err, when a signal (Ctrl-C, SIGTERM) ended the command's
// context (code tells its exit status, 128+N), as what: one line and exit
// 128+N, never the context's error. err as it is otherwise.
func signalled(code func() int, err error, what string) error {
	if err == nil {
		return nil
	}
	if n := code(); n != 0 {
		return &offload.Error{Code: n, Err: errors.New(what)}
	}
	return err
}

// runSignIn runs the kind's vendor login in the box on a terminal relayed
// to ours, opens the first link on the vendor's own hosts once, and
// leaves the login in the box.
func runSignIn(env Env, s Streams, o offloadOptions) error {
	kind, err := kindFlag(o.Kind)
	if err != nil {
		return err
	}
	if o.WithAPIKey {
		return runSignInKey(env, s, kind, o.Box)
	}
	fd := shim.TerminalFd(s.In)
	if fd < 0 {
		return &offload.Error{Code: offload.ExitRefused, Err: errors.New("sign-in needs a terminal: the vendor's login is interactive"),
			Next: []offload.Step{{"run it in a terminal, or sign in with an API key on stdin: ", offload.Command{Verb: offload.VerbSignIn, Kind: kind.Name(), Box: o.Box, Args: []string{"--with-api-key"}}}}}
	}
	c, err := env.dial("")
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(s.Err, "cocoonbox: %s in box %s (~. disconnects)\r\n", kind.Login(), o.Box)
	var opener sync.WaitGroup
	out := &linkOpener{w: s.Out, msg: s.Err, finder: &offload.LinkFinder{Hosts: kind.Hosts()}, wg: &opener,
		browser: auth.HasBrowser(runtime.GOOS, env.Getenv),
		open: func(link string) error {
			return auth.Launch(link, env.Getenv, offload.HostEnv(env.Environ, false))
		}}
	t := &shim.Terminal{Fd: fd, Getenv: env.Getenv, Escape: '~', Msgs: s.Err}
	end, st, err := t.Run(c, &box.Command{
		Box: o.Box,
		// A login shell, whose PATH has the installer's ~/.local/bin.
		Line:   `exec "${SHELL:-/bin/sh}" -lc ` + shellquote.Word(kind.Login()),
		Stdin:  s.In,
		Stdout: out,
	})
	opener.Wait()
	switch {
	case end.Signal != nil:
		fmt.Fprintf(s.Err, "cocoonbox: sign-in ended: %v\n", end.Signal)
		if n, ok := end.Signal.(syscall.Signal); ok {
			return &ExitError{Code: ExitSignal + int(n)}
		}
		return &ExitError{Code: ExitFailure}
	case end.Disconnected:
		fmt.Fprintln(s.Err, "cocoonbox: disconnected")
		return &ExitError{Code: shim.ExitFailure}
	}
	if err != nil {
		return err
	}
	if st.Error != "" || st.Signal != "" || st.Code != 0 {
		return &offload.Error{Code: offload.ExitFailed, Err: fmt.Errorf("%s ended with %s", kind.Login(), st.Text()),
			Next: []offload.Step{{"try again: ", offload.Command{Verb: offload.VerbSignIn, Kind: kind.Name(), Box: o.Box}}}}
	}
	fmt.Fprintf(s.Err, "cocoonbox: the %s login stays in box %s\n", kind.Title(), o.Box)
	return nil
}

// linkOpener copies a terminal's output to w and opens the first allowed
// link the finder sees, once, when this system has a browser; it says on
// msg whether that worked, and where it did not, to open the link by hand.
type linkOpener struct {
	w, msg  io.Writer
	finder  *offload.LinkFinder
	browser bool
	open    func(string) error
	wg      *sync.WaitGroup
	once    sync.Once
	mu      sync.Mutex // msg is written from the opener's goroutine too
}

func (l *linkOpener) Write(p []byte) (int, error) {
	l.mu.Lock()
	n, err := l.w.Write(p)
	l.mu.Unlock()
	l.finder.Write(p[:n])
	if link := l.finder.Found(); link != "" {
		l.once.Do(func() {
			if !l.browser {
				l.say("no browser here (no $DISPLAY or $BROWSER); open the link in a browser on any computer:\r\n  " + link)
				return
			}
			// The opener is watched for a moment; the terminal goes on.
			l.wg.Go(func() {
				if err := l.open(link); err != nil {
					l.say(fmt.Sprintf("%v; open the link in a browser on any computer:\r\n  %s", err, link))
					return
				}
				l.say(fmt.Sprintf("opened %s in your browser (if none opened, open it yourself)", link))
			})
		})
	}
	return n, err
}

// say writes one message of ours between the terminal's lines.
func (l *linkOpener) say(m string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.msg, "\r\ncocoonbox: %s\r\n", m)
}

// runSignInKey reads an API key (readAPIKey) and has the box agent keep
// it where the kind's CLI reads it; stdout then says where, and the CLI
// as its sign-in status reports it.
func runSignInKey(env Env, s Streams, kind agentwire.Kind, boxName string) error {
	key, err := readAPIKey(s, kind)
	if err != nil {
		return err
	}
	ctx, stop, code := signalExitContext()
	defer stop()
	c, err := env.dial("")
	if err != nil {
		return err
	}
	defer c.Close()
	a := &offload.Agent{Exec: c, Box: boxName, Progress: progressWriter(s)}
	res, err := a.SignInKey(ctx, kind, key)
	if err != nil {
		return signalled(code, err, "interrupted before box "+boxName+" answered; it may or may not keep the key: sign in again")
	}
	who := kind.Title()
	if res.CLI != nil {
		who = agentwire.Named(kind, res.CLI.Version)
	}
	where := "the key is in " + res.KeyFile + " (0600)"
	if res.Settings != "" {
		where += ", which " + res.Settings + " points " + kind.Binary() + " at"
	}
	if res.Warning != "" {
		fmt.Fprintf(s.Err, "cocoonbox: warning: %s\n", printable.Line(res.Warning, maxLine))
	}
	fmt.Fprintf(s.Out, "%s in box %s is signed in by key: %s; now offload: %s\n", who, boxName, printable.Line(where, 0),
		commandLine(offload.Command{Verb: offload.VerbOffload, Kind: kind.Name(), Box: boxName}))
	return nil
}

// readAPIKey reads the key as codex login --with-api-key and gh auth
// login --with-token do: at a hidden prompt when stdin is a terminal,
// else stdin's first line (agentwire.ReadAPIKey). No key, or a key that
// is not one word, is one line and exit 2.
func readAPIKey(s Streams, kind agentwire.Kind) (string, error) {
	var key string
	var err error
	if fd := shim.TerminalFd(s.In); fd >= 0 {
		fmt.Fprintf(s.Err, "%s API key for the box (input hidden): ", kind.Title())
		var b []byte
		b, err = readPassword(fd)
		fmt.Fprintln(s.Err)
		if err != nil {
			return "", err
		}
		key, err = agentwire.CheckAPIKey(string(b))
	} else {
		key, err = agentwire.ReadAPIKey(s.In)
	}
	if err != nil {
		return "", &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w: give the key alone on stdin's first line (%s < FILE), or type it at the prompt on a terminal",
			err, commandLine(offload.Command{Verb: offload.VerbSignIn, Kind: kind.Name(), Args: []string{"--with-api-key"}}))}
	}
	return key, nil
}

// readPassword is term.ReadPassword that gives the terminal its echo back
// when INT, TERM or HUP comes while it waits: then sign-in ends with
// 128+N.
func readPassword(fd int) ([]byte, error) {
	old, err := term.GetState(fd)
	if err != nil {
		return nil, err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := term.ReadPassword(fd)
		done <- read{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case sig := <-sigs:
		term.Restore(fd, old)
		code := ExitSignal + int(syscall.SIGINT)
		if n, ok := sig.(syscall.Signal); ok {
			code = ExitSignal + int(n)
		}
		return nil, &ExitError{Code: code}
	}
}
