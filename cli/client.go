package cli

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// Env is the process environment the binaries read: COCOONBOX_ENDPOINT,
// COCOONBOX_TOKEN, COCOONBOX_KEEPALIVE, HOME and the XDG_* directories
// (docs/cli.md).
type Env struct {
	Getenv  func(string) string
	Environ []string
	// GOOS is the platform the commands act for; "" is runtime.GOOS.
	// Tests set it to run another platform's paths (platform.go).
	GOOS string
	// resumeWindow, when not 0, is the resume window of an option
	// (cocoonbox-ssh's -o CocoonboxResumeWindow), which wins over
	// COCOONBOX_RESUME_WINDOW.
	resumeWindow time.Duration
}

// SystemEnv returns the process's own environment.
func SystemEnv() Env { return Env{Getenv: systemGetenv, Environ: os.Environ()} }

// errNoToken is returned when no token is known for the endpoint.
var errNoToken = errors.New("not signed in")

// configDir is the CLI's configuration directory.
func (e Env) configDir() (string, error) { return box.ConfigDir(e.Getenv) }

// store is the token store.
func (e Env) store() (auth.Store, error) {
	dir, err := e.configDir()
	if err != nil {
		return nil, err
	}
	return auth.FileStore{Dir: dir}, nil
}

// token finds the token for ep: $COCOONBOX_TOKEN, else the saved one.
func (e Env) token(ep box.Endpoint) (string, error) {
	if t := e.Getenv("COCOONBOX_TOKEN"); t != "" {
		if !auth.ValidToken(t) {
			return "", errors.New("COCOONBOX_TOKEN is not a cocoonbox token (want cb_ and 64 hex digits)")
		}
		return t, nil
	}
	st, err := e.store()
	if err != nil {
		return "", err
	}
	c, err := st.Get(ep.URL)
	if errors.Is(err, auth.ErrNoToken) {
		// Where nothing answers, a sign-in is not what is missing.
		if why := e.nothingThere(ep); why != "" {
			return "", errors.New(why)
		}
		return "", fmt.Errorf("%w at %s; %s", errNoToken, ep.URL, e.signInHint(ep))
	}
	if err != nil {
		return "", err
	}
	return c.Token, nil
}

// dial resolves the endpoint (flag > $COCOONBOX_ENDPOINT > config > the
// service) and its token, and makes a client.
func (e Env) dial(endpointFlag string) (*box.Client, error) {
	return e.dialFor(endpointFlag, false)
}

// dialFor is dial; with follow, every call sends the token saved when it
// is made (tokenSource), for a client that lives long.
func (e Env) dialFor(endpointFlag string, follow bool) (*box.Client, error) {
	ep, err := box.ResolveEndpoint(endpointFlag, e.Getenv)
	if err != nil {
		return nil, err
	}
	tok, err := e.token(ep)
	if err != nil {
		return nil, err
	}
	opts := []box.DialOption{box.WithSignIn(e.signInHint(ep)), box.WithUnreachable(e.unreachableHint(ep))}
	if follow && e.Getenv("COCOONBOX_TOKEN") == "" {
		if src, err := e.tokenSource(ep, tok); err == nil {
			opts = append(opts, box.WithTokenSource(src))
		}
	}
	if v := e.Getenv("COCOONBOX_KEEPALIVE"); v != "" {
		t, timeout, err := parseKeepalive(v)
		if err != nil {
			return nil, err
		}
		opts = append(opts, box.WithKeepalive(t, timeout))
	}
	if r, err := e.resume(); err != nil {
		return nil, err
	} else if r != nil {
		opts = append(opts, box.WithResume(*r))
	}
	sh, err := e.sharing(ep)
	if err != nil {
		return nil, err
	}
	return box.Dial(ep, tok, append(opts, sh...)...)
}

// tokenSource returns the token saved for ep at each call, starting from
// tok: the credentials file is read again only when its modification time
// or size changed since the last read (or it is another file), and a failed read (the file half
// way through a logout, or gone) keeps the last token, which the box then
// refuses or not as it sees fit.
func (e Env) tokenSource(ep box.Endpoint, tok string) (func() string, error) {
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	fst, ok := st.(auth.FileStore)
	if !ok {
		return nil, errors.New("not a file store")
	}
	// Each save replaces the file (a new inode), so the same file with the
	// same time and size is the same content, even where the clock is
	// coarse; all tokens are one size.
	same := func(a, b os.FileInfo) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
	}
	look := func() os.FileInfo {
		fi, err := os.Stat(fst.Path())
		if err != nil {
			return nil
		}
		return fi
	}
	var mu sync.Mutex
	last := look()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		if now := look(); !same(now, last) {
			last = now
			if t, err := e.token(ep); err == nil {
				tok = t
			}
		}
		return tok
	}, nil
}

// unixDialTimeout bounds nothingThere's connect to a unix socket, which
// answers at once or not at all.
const unixDialTimeout = 2 * time.Second

// nothingThere is the line for an endpoint with no token whose server is
// not what the endpoint says: a unix socket nothing listens on (your local
// box, stopped: start it; another path: where a local box would listen),
// or an http:// port that serves TLS (box.PlainToTLS); "" otherwise.
func (e Env) nothingThere(ep box.Endpoint) string {
	path, ok := strings.CutPrefix(ep.URL, "unix://")
	if !ok {
		return box.PlainToTLS(ep)
	}
	c, err := net.DialTimeout("unix", path, unixDialTimeout)
	if err == nil {
		c.Close()
		return ""
	}
	why := err.Error()
	if se, ok := errors.AsType[*os.SyscallError](err); ok {
		why = se.Err.Error()
	}
	line := fmt.Sprintf("nothing listens at %s (%s)", ep.URL, why)
	if dir, err := localboxDir(e); err == nil && path == localbox.SocketPath(dir) {
		return line + ": your local box is not running; start it with `cocoonbox localbox start`"
	}
	return line + fmt.Sprintf(": is the endpoint right (--endpoint, COCOONBOX_ENDPOINT)? a local box listens there after `cocoonbox localbox start --listen unix:%s`", path)
}

// unreachableHint is box.UnreachableHint for ep, but for the endpoint this
// user's local box served at after the last start that gave --listen or
// TLS flags (listen.json): there a plain start serves it again with those
// flags, which a `--listen ep` hint would change (a local box on every
// address, named otherwise on laptops, moved to one).
func (e Env) unreachableHint(ep box.Endpoint) string {
	if dir, err := localboxDir(e); err == nil {
		if l, err := localbox.ReadListening(dir); err == nil && l.Endpoint == ep.URL {
			return "is the local box running? (cocoonbox localbox start)"
		}
	}
	return box.UnreachableHint(ep)
}

// signInHint names the command that gets a token for ep from where this
// user stands: a local box this user runs, or could run there, is entered
// by localbox start, which saves a token for it; a unix socket cannot take
// a browser sign-in; any other endpoint takes cocoonbox login.
func (e Env) signInHint(ep box.Endpoint) string {
	login := "sign in with `cocoonbox login`"
	if ep.URL == box.DefaultEndpoint {
		// The README starts with a local box; a fresh HOME lands here.
		return "sign in to the hosted service with `cocoonbox login`, or run a local box on this machine, no account needed: `cocoonbox localbox start`"
	}
	if e.Getenv("COCOONBOX_ENDPOINT") != "" {
		login = "sign in with `cocoonbox login` (COCOONBOX_ENDPOINT names the endpoint)"
	}
	dir, err := localboxDir(e)
	if err != nil {
		return login
	}
	if ri, ok := localbox.ReadRuntime(dir); ok && ri.Endpoint == ep.URL {
		return "this is your local box: `cocoonbox localbox start` saves a token for it again"
	}
	if ep.URL == "unix://"+localbox.SocketPath(dir) {
		return "start your local box with `cocoonbox localbox start`"
	}
	if l, err := localbox.ReadListening(dir); err == nil && l.Endpoint == ep.URL {
		// A plain start listens there again (listen.json).
		return "start your local box with `cocoonbox localbox start`"
	}
	if strings.HasPrefix(ep.URL, "unix://") {
		return fmt.Sprintf("a unix socket takes no browser sign-in: give a key with `cocoonbox login --endpoint %s --token -`", ep.URL)
	}
	if near := e.sameHostEndpoints(ep); len(near) > 0 {
		return fmt.Sprintf("a token is saved for %s: is the endpoint right? else %s", strings.Join(near, ", "), login)
	}
	if u, err := url.Parse(ep.URL); err == nil && u.Scheme == "http" && (u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost" || u.Hostname() == "::1") {
		return fmt.Sprintf("%s, or if it is your local box, start it with `cocoonbox localbox start --listen %s`", login, u.Host)
	}
	return login
}

// sameHostEndpoints are the endpoints with a saved token on ep's host but
// not ep itself (another port: a typo, or the server moved).
func (e Env) sameHostEndpoints(ep box.Endpoint) []string {
	st, err := e.store()
	if err != nil {
		return nil
	}
	fst, ok := st.(auth.FileStore)
	if !ok {
		return nil
	}
	eps, err := fst.Endpoints()
	u, uerr := url.Parse(ep.URL)
	if err != nil || uerr != nil {
		return nil
	}
	var near []string
	for _, s := range eps {
		if v, err := url.Parse(s); err == nil && s != ep.URL && v.Hostname() == u.Hostname() {
			near = append(near, s)
		}
	}
	return near
}

// parseKeepalive reads COCOONBOX_KEEPALIVE, "INTERVAL,TIMEOUT" in Go's
// duration syntax: a ping after INTERVAL (at least 10s, gRPC's floor) of
// silence while a call is open, and failure TIMEOUT (at least 1s) later.
func parseKeepalive(v string) (time.Duration, time.Duration, error) {
	bad := fmt.Errorf("COCOONBOX_KEEPALIVE=%q: want INTERVAL,TIMEOUT such as 30s,15s, INTERVAL at least 10s and TIMEOUT at least 1s", v)
	a, b, ok := strings.Cut(v, ",")
	if !ok {
		return 0, 0, bad
	}
	t, err1 := time.ParseDuration(a)
	timeout, err2 := time.ParseDuration(b)
	if err1 != nil || err2 != nil || t < 10*time.Second || timeout < time.Second {
		return 0, 0, bad
	}
	return t, timeout, nil
}

// stateDir is $XDG_STATE_HOME/cocoonbox, else ~/.local/state/cocoonbox.
func (e Env) stateDir() (string, error) {
	if d := e.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "cocoonbox"), nil
	}
	h := e.Getenv("HOME")
	if h == "" {
		return "", errors.New("neither XDG_STATE_HOME nor HOME is set")
	}
	return filepath.Join(h, ".local", "state", "cocoonbox"), nil
}

// resume is how commands outlive their stream (box.Resume), from
// COCOONBOX_RESUME (on: every command; unset, the default: a command on
// a terminal only, as a script's command would pay the session path's
// startup, docs/benchmarks.md; off: none) and COCOONBOX_RESUME_WINDOW
// and COCOONBOX_RESUME_TERMINAL_WINDOW (durations); nil when off. Its
// lines go to stderr.
func (e Env) resume() (*box.Resume, error) {
	terminals := false
	switch v := e.Getenv("COCOONBOX_RESUME"); v {
	case "on":
	case "":
		terminals = true
	case "off":
		return nil, nil
	default:
		return nil, &UsageError{fmt.Errorf("COCOONBOX_RESUME=%q: want on or off", v)}
	}
	// Its lines start as the running program's own (cocoonbox-ssh's,
	// git-remote-cocoonbox's).
	r := &box.Resume{Notify: os.Stderr, Prefix: strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") + ": ", Terminals: terminals}
	if e.resumeWindow > 0 {
		r.Window = e.resumeWindow
	} else if v := e.Getenv("COCOONBOX_RESUME_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, &UsageError{fmt.Errorf("COCOONBOX_RESUME_WINDOW=%q: want a duration such as 10m", v)}
		}
		r.Window = d
	}
	if v := e.Getenv("COCOONBOX_RESUME_TERMINAL_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, &UsageError{fmt.Errorf("COCOONBOX_RESUME_TERMINAL_WINDOW=%q: want a duration such as 1h", v)}
		}
		r.TerminalWindow = d
	}
	return r, nil
}
