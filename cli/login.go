package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// loginOptions are the flags of `cocoonbox login`.
type loginOptions struct {
	Endpoint string
	// Token is "-" to read a personal key from stdin; any other value is
	// refused, since a token is never an argument.
	Token     string
	Invite    string
	NoBrowser bool
	// CA is a PEM file of the CA to trust for an https endpoint, pinned
	// for it once the sign-in works.
	CA string
	// Timeout bounds the wait for the browser's answer.
	Timeout time.Duration
}

func newLogin(env Env, s Streams) *cobra.Command {
	var o loginOptions
	c := &cobra.Command{
		Use:        "login",
		SuggestFor: []string{"signin", "auth"},
		Short:      "Sign in through the browser, or with a personal key (--token -)",
		Long: `login signs this computer in at the endpoint. It checks first that the
endpoint answers (5 s), then opens the endpoint's consent page in your
browser; after you click Allow there, the CLI gets a device token of its
own, saved in credentials.json (0600) for the endpoint. It waits --timeout
(10 minutes) for the answer; Ctrl-C gives up.

With no browser here (--no-browser, no $DISPLAY or $BROWSER, or an opener
that fails) login prints the link: open it in a browser on any computer,
click Allow, and paste the address that browser ends on
(http://127.0.0.1:PORT/callback?code=...) back here. Its state and issuer
are checked as at the loopback port.

--token - reads a personal key from stdin, or from a hidden prompt on a
terminal, instead. A token is never an argument and never printed.

A local box needs no login: localbox start saves a token for it. On
loopback TCP (localbox start --listen 127.0.0.1:PORT) it takes a browser
sign-in too, and asks for its sign-in code first: login prints it.`,
		Example: `  cocoonbox login
  cocoonbox login --no-browser
  cocoonbox login --endpoint http://127.0.0.1:7300
  cocoonbox login --token - < key.txt`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return runLogin(env, s, o) },
	}
	c.Flags().StringVar(&o.Endpoint, "endpoint", "", "the API endpoint (default: $COCOONBOX_ENDPOINT, then the saved one); saved as the current one")
	c.Flags().StringVar(&o.Token, "token", "", "- reads a personal key from stdin instead of signing in through the browser")
	c.Flags().StringVar(&o.Invite, "invite", "", "an invite code for signing up")
	c.Flags().BoolVar(&o.NoBrowser, "no-browser", false, "print the sign-in link, for a browser on any computer, and read the address it ends on from stdin")
	c.Flags().DurationVar(&o.Timeout, "timeout", defaultLoginTimeout, "how long to wait for the browser's answer")
	c.Flags().StringVar(&o.CA, "ca", "", "trust this PEM CA (or self-signed certificate) for the https endpoint, and pin it for it")
	return c
}

func runLogin(env Env, s Streams, o loginOptions) error {
	if o.Token != "" && o.Token != "-" {
		return &UsageError{errors.New("--token takes only -: a token is never an argument\ngive it on stdin: cocoonbox login --token - < FILE")}
	}
	ep, err := box.ResolveEndpoint(o.Endpoint, env.Getenv)
	if err != nil {
		return err
	}
	var caPEM []byte
	if o.CA != "" {
		if !ep.TLS {
			return &UsageError{fmt.Errorf("--ca is for an https endpoint, and %s is not one", ep.URL)}
		}
		if caPEM, err = os.ReadFile(o.CA); err != nil {
			return fmt.Errorf("--ca: %w", err)
		}
		ep.CAFile = o.CA
	}
	hc, err := box.HTTPClient(ep, 30*time.Second)
	if err != nil {
		return err
	}
	st, err := env.store()
	if err != nil {
		return err
	}
	old, err := st.Get(ep.URL)
	if err != nil && !errors.Is(err, auth.ErrNoToken) {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var cred auth.Credential
	var done string
	if o.Token == "-" {
		tok, err := readToken(s)
		if err != nil {
			return err
		}
		c, err := box.Dial(ep, tok)
		if err != nil {
			return err
		}
		lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err = c.List(lctx)
		cancel()
		c.Close()
		if errors.Is(err, box.ErrUnauthenticated) {
			return fmt.Errorf("%s refused this key; nothing was saved\ncheck the key, or sign in through the browser with: cocoonbox login", ep.URL)
		}
		if err != nil {
			return fmt.Errorf("check the key (nothing was saved): %w", err)
		}
		cred = auth.Credential{Token: tok, Source: auth.SourcePaste}
		done = fmt.Sprintf("signed in to %s with a personal key", ep.URL)
	} else {
		host, _ := os.Hostname()
		name := auth.DeviceName(host)
		tok, err := browserLogin(ctx, env, s, ep, name, o, hc)
		if err != nil {
			return err
		}
		cred = auth.Credential{Token: tok, Source: auth.SourceBrowser}
		done = fmt.Sprintf("signed in to %s as device %q", ep.URL, name)
	}

	if caPEM != nil {
		dir, err := env.configDir()
		if err != nil {
			return err
		}
		p, err := box.PinCA(dir, ep, caPEM)
		if err != nil {
			return fmt.Errorf("pin the CA: %w", err)
		}
		fmt.Fprintf(s.Err, "pinned the CA for %s in %s\n", ep.URL, p)
	}
	if err := st.Put(ep.URL, cred); err != nil {
		return fmt.Errorf("save the token: %w", err)
	}
	if o.Endpoint != "" {
		dir, err := env.configDir()
		if err != nil {
			return err
		}
		if err := box.SaveConfig(dir, box.Config{Endpoint: ep.URL}); err != nil {
			return err
		}
	}
	fmt.Fprintln(s.Err, done)
	// A new login replaces the browser token it revokes (seeds/001).
	if old.Source == auth.SourceBrowser && old.Token != cred.Token {
		if err := auth.Revoke(ctx, hc, ep.URL, old.Token); err != nil {
			fmt.Fprintf(s.Err, "cocoonbox: warning: the token this login replaces was not revoked: %s\nrevoke it with: cocoonbox devices revoke ID\n", redactTokens(err.Error()))
		}
	}
	if env.Getenv("COCOONBOX_TOKEN") != "" {
		fmt.Fprintln(s.Err, "note: COCOONBOX_TOKEN is set, and wins over the saved token")
	}
	return nil
}

// defaultLoginTimeout bounds how long login waits for the browser.
const defaultLoginTimeout = 10 * time.Minute

// browserLogin runs the sign-in through the browser and returns the token.
// It checks first that the endpoint answers, and opens the browser only
// when this system has one; otherwise, or when the opener fails, it
// prints the link and takes the address the browser ended on from stdin.
func browserLogin(ctx context.Context, env Env, s Streams, ep box.Endpoint, name string, o loginOptions, hc *http.Client) (string, error) {
	if strings.HasPrefix(ep.URL, "unix://") {
		return "", fmt.Errorf("%s is a unix socket, which a browser cannot reach\na local box needs no login: cocoonbox localbox start saves a token for it; for a browser sign-in, start it on loopback TCP (cocoonbox localbox start --listen 127.0.0.1:PORT), or give a key: cocoonbox login --token -", ep.URL)
	}
	switch {
	case o.Timeout < 0:
		return "", &UsageError{errors.New("--timeout takes a duration above 0, such as 10m")}
	case o.Timeout == 0:
		o.Timeout = defaultLoginTimeout
	}
	if err := auth.Probe(ctx, hc, ep.URL); err != nil {
		// A certificate this computer refuses is said in one line, before a
		// browser shows its own warning.
		if ce, ok := errors.AsType[*box.CertError](err); ok {
			return "", ce
		}
		if tls := box.PlainToTLS(ep); tls != "" {
			return "", fmt.Errorf("%s; nothing was opened", tls)
		}
		return "", fmt.Errorf("%v; nothing was opened: check --endpoint or $COCOONBOX_ENDPOINT, or your network", err)
	}
	f, err := auth.Start(ep.URL, name, auth.FlowOptions{Invite: o.Invite, HTTPClient: hc})
	if err != nil {
		return "", err
	}
	defer f.Close()
	if code, ok := localSignInCode(env, ep); ok {
		fmt.Fprintf(s.Err, "this local box asks for its sign-in code: %s\n", code)
	}
	link := f.AuthURL()
	paste := o.NoBrowser
	switch {
	case o.NoBrowser:
	case !auth.HasBrowser(runtime.GOOS, env.Getenv):
		fmt.Fprintln(s.Err, "no browser here (no $DISPLAY or $BROWSER): finish in a browser on any computer")
		paste = true
	default:
		fmt.Fprintf(s.Err, "opening the browser to sign in at %s\nif it does not open, visit:\n  %s\n", ep.URL, link)
		if err := auth.Launch(link, env.Getenv, env.Environ); err != nil {
			fmt.Fprintf(s.Err, "cocoonbox: %v; open the link yourself\n", err)
			paste = true
		}
	}
	wctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if paste {
		fmt.Fprintf(s.Err, `to sign in, open this link in a browser, on this computer or any other:
  %s
after Allow, the browser goes to %s?code=…; where that page
does not load (another computer), copy its whole address and paste it here
`, link, f.RedirectURL())
		go readAnswers(wctx, f, s)
	}
	fmt.Fprintf(s.Err, "waiting up to %s for the sign-in (Ctrl-C gives up)\n", minutes(o.Timeout))
	tok, err := f.Wait(wctx)
	switch {
	case errors.Is(err, context.Canceled):
		return "", &ExitError{Code: ExitSignal + int(syscall.SIGINT), Err: errors.New("sign-in cancelled; nothing was saved")}
	case errors.Is(err, context.DeadlineExceeded):
		return "", fmt.Errorf("no sign-in answer within %s; nothing was saved\ntry again: cocoonbox login (--no-browser finishes in another computer's browser)", minutes(o.Timeout))
	case errors.Is(err, auth.ErrDenied):
		return "", errors.New("sign-in was denied in the browser; nothing was saved")
	case err != nil:
		return "", fmt.Errorf("sign-in at %s: %w", ep.URL, err)
	}
	return tok, nil
}

// readAnswers gives f each line of stdin until one is taken as the
// answer; a line that is not one is refused in one line, and the wait
// goes on.
func readAnswers(ctx context.Context, f *auth.Flow, s Streams) {
	sc := bufio.NewScanner(s.In)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		err := f.Paste(ctx, sc.Text())
		if err == nil {
			return
		}
		fmt.Fprintf(s.Err, "cocoonbox: %s\n", printable.Line(err.Error(), maxLine))
		if !errors.Is(err, auth.ErrNotAnswer) {
			return
		}
	}
}

// minutes formats a wait as people say it: "10 minutes", "90s".
func minutes(d time.Duration) string {
	switch {
	case d == time.Minute:
		return "1 minute"
	case d%time.Minute == 0:
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return d.String()
}

// localSignInCode returns the sign-in code of the local box this user runs
// when ep is its endpoint.
func localSignInCode(env Env, ep box.Endpoint) (string, bool) {
	dir, err := localboxDir(env)
	if err != nil {
		return "", false
	}
	ri, ok := localbox.ReadRuntime(dir)
	if !ok {
		return "", false
	}
	if rep, err := box.ParseEndpoint(ri.Endpoint); err != nil || rep.URL != ep.URL {
		return "", false
	}
	code, err := localbox.SignInCode(dir)
	return code, err == nil
}

// readToken reads a personal key from a hidden prompt on a terminal, else
// from the first line of stdin. The key is never echoed.
func readToken(s Streams) (string, error) {
	var line string
	if f, ok := s.In.(*os.File); ok && isTerminal(f) {
		fmt.Fprint(s.Err, "personal key (input hidden): ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(s.Err)
		if err != nil {
			return "", fmt.Errorf("read the key: %w", err)
		}
		line = string(b)
	} else {
		b, err := bufio.NewReader(io.LimitReader(s.In, 4096)).ReadString('\n')
		if err != nil && err != io.EOF {
			return "", fmt.Errorf("read the key from stdin: %w", err)
		}
		line = b
	}
	tok := strings.TrimSpace(line)
	if tok == "" {
		return "", errors.New("no key on stdin\ngive it with: cocoonbox login --token - < FILE")
	}
	if !auth.ValidToken(tok) {
		return "", errors.New("that is not a cocoonbox token (want cb_ and 64 hex digits)")
	}
	return tok, nil
}
