package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/oauth2"
)

// The first-party client the CLI signs in as, and the one scope it asks
// for (seeds/001 "Browser sign-in and device tokens").
const (
	ClientID = "cocoonbox-cli"
	Scope    = "account"
)

// MaxDeviceName is the longest device name the server accepts, in bytes of
// UTF-8; a longer one is an invalid_request.
const MaxDeviceName = 64

// Paths of the authorization server under the endpoint URL.
const (
	AuthorizePath = "/cb/oauth/authorize"
	TokenPath     = "/cocoonbox.oauth/token"
	RevokePath    = "/cocoonbox.oauth/revoke"
)

// Errors of a browser sign-in; match them with errors.Is.
var (
	// ErrStateMismatch: the answer at the loopback port carried another
	// state than the one sent, so it does not answer this sign-in.
	ErrStateMismatch = errors.New("the sign-in answer does not match the request (wrong state)")
	// ErrIssuerMismatch: the answer's iss (RFC 9207) is not the endpoint the
	// CLI signed in at.
	ErrIssuerMismatch = errors.New("the sign-in answer came from another server (wrong iss)")
	// ErrDenied: the user clicked Deny (error=access_denied).
	ErrDenied = errors.New("sign-in was denied in the browser")
)

// DeviceName makes a device name from a host name: control characters are
// dropped and the result is cut to at most MaxDeviceName bytes without
// splitting a UTF-8 sequence. An empty result becomes "unnamed".
func DeviceName(host string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(host, "") {
		if unicode.IsControl(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > MaxDeviceName {
			break
		}
		b.WriteRune(r)
	}
	if strings.TrimSpace(b.String()) == "" {
		return "unnamed"
	}
	return b.String()
}

// Flow is one browser sign-in at an endpoint: RFC 8252's loopback redirect
// with PKCE S256 (RFC 7636). Start it, send the user to AuthURL, then Wait.
type Flow struct {
	issuer   string
	cfg      oauth2.Config
	verifier string
	state    string
	authURL  string
	lis      net.Listener
	client   *http.Client

	once sync.Once   // the first answer, from the loopback port or pasted
	done chan result // its outcome
}

// result is what one answer gave.
type result struct {
	tok string
	err error
}

// FlowOptions are the optional parts of a sign-in request.
type FlowOptions struct {
	// Invite is an invite code carried into the server's sign-up; empty for none.
	Invite string
	// HTTPClient makes the token request; nil means a client with a 30 s timeout.
	HTTPClient *http.Client
}

// Start begins a sign-in at issuer (the endpoint URL, http or https, with
// no path) for the device deviceName: it listens on 127.0.0.1:0 for the
// answer and makes the PKCE verifier and the state. Close it when done.
func Start(issuer, deviceName string, o FlowOptions) (*Flow, error) {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("browser sign-in needs an http or https endpoint, not %q", issuer)
	}
	if len(deviceName) > MaxDeviceName {
		return nil, fmt.Errorf("device name is %d bytes; at most %d", len(deviceName), MaxDeviceName)
	}
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the sign-in answer: %w", err)
	}
	f := &Flow{
		issuer:   issuer,
		verifier: oauth2.GenerateVerifier(),
		state:    randomString(32),
		lis:      lis,
		client:   o.HTTPClient,
		done:     make(chan result, 1),
	}
	if f.client == nil {
		f.client = &http.Client{Timeout: 30 * time.Second}
	}
	f.cfg = oauth2.Config{
		ClientID: ClientID,
		Endpoint: oauth2.Endpoint{
			AuthURL:   issuer + AuthorizePath,
			TokenURL:  issuer + TokenPath,
			AuthStyle: oauth2.AuthStyleInParams,
		},
		RedirectURL: fmt.Sprintf("http://127.0.0.1:%d/callback", lis.Addr().(*net.TCPAddr).Port),
		Scopes:      []string{Scope},
	}
	opts := []oauth2.AuthCodeOption{
		oauth2.S256ChallengeOption(f.verifier),
		oauth2.SetAuthURLParam("device_name", deviceName),
	}
	if o.Invite != "" {
		opts = append(opts, oauth2.SetAuthURLParam("invite", o.Invite))
	}
	f.authURL = f.cfg.AuthCodeURL(f.state, opts...)
	return f, nil
}

// AuthURL is the authorization request to open in the browser.
func (f *Flow) AuthURL() string { return f.authURL }

// RedirectURL is the loopback redirect URI, http://127.0.0.1:PORT/callback.
func (f *Flow) RedirectURL() string { return f.cfg.RedirectURL }

// Close stops listening; Wait then returns.
func (f *Flow) Close() error { return f.lis.Close() }

// Wait serves the loopback port until the browser brings the answer, an
// answer is pasted (Paste), or ctx ends. It checks state and iss,
// exchanges the code at the token endpoint with the verifier, shows the
// browser a page that says whether it worked, and returns the access
// token. Only the first answer counts: any later one is refused, so a code
// cannot be brought twice. Errors wrap ErrStateMismatch, ErrIssuerMismatch
// or ErrDenied where those apply.
func (f *Flow) Wait(ctx context.Context) (string, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		res, first := f.take(ctx, r.URL.Query())
		switch {
		case !first:
			page(w, http.StatusGone, "This sign-in is already finished.", "Return to the terminal.")
		case res.err != nil:
			page(w, http.StatusBadRequest, "Sign-in failed: "+res.err.Error(), "You can close this tab and return to the terminal.")
		default:
			page(w, http.StatusOK, "Signed in to cocoonbox.", "You can close this tab.")
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(f.lis) }()
	defer srv.Close()
	select {
	case r := <-f.done:
		// Let the page reach the browser before the server goes.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		srv.Shutdown(sctx)
		cancel()
		return r.tok, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	case err := <-served:
		return "", fmt.Errorf("the loopback listener stopped: %w", err)
	}
}

// take handles one answer; first is false, and nothing is done, when an
// answer came before.
func (f *Flow) take(ctx context.Context, q url.Values) (res result, first bool) {
	f.once.Do(func() { first = true })
	if !first {
		return result{}, false
	}
	res.tok, res.err = f.answer(ctx, q)
	f.done <- res
	return res, true
}

// ErrNotAnswer: a pasted line is not the address the browser ended on
// after Allow or Deny; it is refused and the flow goes on waiting.
var ErrNotAnswer = errors.New("that is not the address the browser ended on")

// Paste takes the answer from the address the browser ended on after
// Allow or Deny (http://127.0.0.1:PORT/callback?code=…&state=…&iss=…),
// copied by hand from a browser on another computer, where that address
// does not load. The answer goes through the same checks as one at the
// loopback port (state, iss, then the code's exchange with the PKCE
// verifier) and Wait returns its outcome. A line that is not such an
// address wraps ErrNotAnswer and leaves the flow waiting; one after the
// first answer is refused too.
func (f *Flow) Paste(ctx context.Context, line string) error {
	line = strings.TrimSpace(line)
	u, err := url.Parse(line)
	if err != nil || u.Scheme != "http" || u.Path != "/callback" || !strings.HasPrefix(u.Host, "127.0.0.1") {
		if line != "" && !strings.ContainsAny(line, "/?&= ") {
			return fmt.Errorf("%w: a code alone cannot be checked; paste the whole address, starting %s?", ErrNotAnswer, f.cfg.RedirectURL)
		}
		return fmt.Errorf("%w; paste the whole address, starting %s?", ErrNotAnswer, f.cfg.RedirectURL)
	}
	if "http://"+u.Host+u.Path != f.cfg.RedirectURL {
		return fmt.Errorf("%w: it is for another sign-in (port %s, this one waits at %s)", ErrNotAnswer, u.Port(), f.cfg.RedirectURL)
	}
	q := u.Query()
	if q.Get("state") == "" {
		return fmt.Errorf("%w: it has no state; copy the whole address", ErrNotAnswer)
	}
	if _, first := f.take(ctx, q); !first {
		return errors.New("this sign-in has its answer already")
	}
	return nil
}

// answer checks one answer at the loopback port and exchanges its code.
func (f *Flow) answer(ctx context.Context, q url.Values) (string, error) {
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.state)) != 1 {
		return "", ErrStateMismatch
	}
	if iss := q.Get("iss"); iss != f.issuer {
		return "", fmt.Errorf("%w: %q, not %s", ErrIssuerMismatch, iss, f.issuer)
	}
	if e := q.Get("error"); e != "" {
		if e == "access_denied" {
			return "", ErrDenied
		}
		return "", fmt.Errorf("the server refused the sign-in: %s", oauthError(e, q.Get("error_description")))
	}
	code := q.Get("code")
	if code == "" {
		return "", errors.New("the sign-in answer has no code")
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, f.client)
	tok, err := f.cfg.Exchange(ctx, code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok && re.ErrorCode != "" {
			return "", fmt.Errorf("the server refused the code: %s", oauthError(re.ErrorCode, re.ErrorDescription))
		}
		return "", fmt.Errorf("exchange the code at %s: %w", f.cfg.Endpoint.TokenURL, err)
	}
	if !strings.EqualFold(tok.Type(), "Bearer") || !ValidToken(tok.AccessToken) {
		return "", errors.New("the server's answer is not a cocoonbox token")
	}
	return tok.AccessToken, nil
}

// oauthError formats an OAuth error code and its description, keeping only
// printable characters of what the server said.
func oauthError(code, desc string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.IsPrint(r) {
				return r
			}
			return -1
		}, s)
	}
	if desc == "" {
		return clean(code)
	}
	return clean(code) + ": " + clean(desc)
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cocoonbox sign-in</title></head>
<body style="font-family: sans-serif; max-width: 36em; margin: 4em auto">
<h1 id="result">{{.Head}}</h1>
<p>{{.Body}}</p>
</body></html>
`))

// page answers the browser at the loopback port.
func page(w http.ResponseWriter, code int, head, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	pageTmpl.Execute(w, struct{ Head, Body string }{head, body})
}

// randomString is n random bytes, base64url without padding.
func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Revoke asks the server at issuer to revoke token (RFC 7009, at
// RevokePath). The server answers 200 for a token it does not know, so an
// error means the request failed, not that the token was already gone.
func Revoke(ctx context.Context, client *http.Client, issuer, token string) error {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}, "client_id": {ClientID}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, issuer+RevokePath, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("revoke at %s: %w", issuer, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revoke at %s: %s", issuer, resp.Status)
	}
	return nil
}

// unwrapURLError drops url.Error's repetition of the URL, which the caller
// names already.
func unwrapURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// ProbeTimeout bounds Probe.
const ProbeTimeout = 5 * time.Second

// Probe checks that the authorization server at issuer answers at all, with
// one request for its RFC 8414 metadata bounded by ProbeTimeout: any HTTP
// answer counts, since it is only a check that sign-in will not wait on a
// server that is not there. The error says why it did not answer.
func Probe(ctx context.Context, issuer string) error {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, issuer+"/.well-known/oauth-authorization-server", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("%s did not answer within %v", issuer, ProbeTimeout)
		}
		return fmt.Errorf("%s does not answer: %w", issuer, unwrapURLError(err))
	}
	resp.Body.Close()
	return nil
}
