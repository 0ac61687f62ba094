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

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
	"github.com/cocoonbox/cocoonbox/offload"
	"github.com/cocoonbox/cocoonbox/shim"
)

// signalContext is cancelled by the first INT or TERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// signalExitContext is signalContext that also tells the exit status
// the signal calls for, 128+N (docs/cli.md), or 0 before any.
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

// runSignIn runs the kind's vendor login in the box on a terminal relayed
// to ours, opens the first link on the vendor's own hosts once, and
// leaves the login in the box.
func runSignIn(env Env, s Streams, o offloadOptions) error {
	kind, err := kindFlag(o.Kind)
	if err != nil {
		return err
	}
	fd := shim.TerminalFd(s.In)
	if fd < 0 {
		return &offload.Error{Code: offload.ExitRefused, Err: errors.New("sign-in needs a terminal: the vendor's login is interactive"),
			Next: []offload.Step{{"run it in a terminal"}}}
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
