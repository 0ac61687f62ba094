package localbox

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/oauth2"
)

// The authorization server of the local box (seeds/001 "Browser sign-in
// and device tokens"; docs/login.md): the first-party clients sign in with
// RFC 8252's loopback redirect and PKCE S256, the owner approves on a
// consent page, and the client gets a device token.

// firstParty are the clients fixed in the server, by id, with the name the
// consent page shows. Their only scope is "account".
var firstParty = map[string]string{
	"cocoonbox-cli": "cocoonbox CLI",
	"cocoonbox-app": "CocoonBox app",
}

const (
	codeTTL       = 60 * time.Second
	maxDeviceName = 64
	maxBody       = 64 << 10
	sessionHeader = "X-Cocoonbox-Session"
)

//go:embed page
var pageFiles embed.FS

// oauthServer holds the one-use codes between approve and token.
type oauthServer struct {
	s *Server

	// csrfKey signs the CSRF tokens of the page's forms (form.go).
	csrfKey []byte

	mu    sync.Mutex
	codes map[string]*authCode // by sha256 of the code
}

func newOAuthServer(s *Server) *oauthServer {
	k := make([]byte, 32)
	rand.Read(k)
	return &oauthServer{s: s, csrfKey: k}
}

type authCode struct {
	req authRequest
	// account is the account whose console approved it; "" the owner's.
	account string
	expires time.Time
	used    bool
	tokenID string // the token issued for it, revoked if it comes back
}

// authRequest is a checked authorization request.
type authRequest struct {
	clientID    string
	redirectURI string
	challenge   string
	deviceName  string
	state       string
}

// oauthError is an error answer: to the page when fatal (the client or
// its redirect URI is not to be trusted), else back to the client.
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	fatal       bool
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

// handler is the HTTP side of the local box.
func (o *oauthServer) handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /.well-known/oauth-authorization-server", o.metadata)
	m.HandleFunc("GET /cb/oauth/authorize", o.authorize)
	m.HandleFunc("POST /cb/oauth/authorize", o.form)
	m.HandleFunc("GET /cb/oauth/authorize.js", o.page("page/authorize.js", "text/javascript; charset=utf-8"))
	m.HandleFunc("GET /cb/oauth/page.css", o.page("page/page.css", "text/css; charset=utf-8"))
	m.HandleFunc("POST /cb/api/session", o.signIn)
	m.HandleFunc("POST /cb/api/oauth/check", o.console(o.check))
	m.HandleFunc("POST /cb/api/oauth/approve", o.console(o.approve))
	m.HandleFunc("POST /cb/api/oauth/deny", o.console(o.deny))
	m.HandleFunc("GET /cb/api/devices", o.console(o.devices))
	m.HandleFunc("DELETE /cb/api/devices/{id}", o.console(o.revokeDevice))
	m.HandleFunc("POST /cb/api/me/sign-out-everywhere", o.console(o.signOutEverywhere))
	m.HandleFunc("POST /cocoonbox.oauth/token", o.token)
	m.HandleFunc("POST /cocoonbox.oauth/revoke", o.revoke)
	m.Handle(ControlMCPPath, o.s.mcpHandler())
	return o.guard(m)
}

// issuerKey carries the issuer of a request in its context.
type issuerKey struct{}

// guard refuses a Host that is not this server, which stops DNS
// rebinding: a web page cannot reach these routes under a name of its own.
// Without TLS the server answers only on a loopback name; with TLS also on
// the names of its certificate (a page under another name fails the
// browser's certificate check first). It sets the headers every answer
// carries.
func (o *oauthServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", contentPolicy("'self'"))
		iss, ok := o.issuer(r.Host)
		if !ok {
			msg := "this server answers only at 127.0.0.1, localhost or [::1] on its own port"
			if o.s.TLS != nil {
				msg = "this server answers only at the names of its certificate (" + strings.Join(CertNames(o.s.TLS), ", ") + ") on its own port"
			}
			http.Error(w, msg, http.StatusMisdirectedRequest)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		next.ServeHTTP(w, r.WithContext(contextWithIssuer(r, iss)))
	})
}

// contentPolicy is the Content-Security-Policy of every answer, its forms
// allowed to post to formAction.
func contentPolicy(formAction string) string {
	return "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; form-action " + formAction + "; frame-ancestors 'none'; base-uri 'none'"
}

// issuer returns the issuer URL for a request to host: the local box's
// endpoint as the client named it (in the client's canonical form), on a
// name it answers at and its own port.
func (o *oauthServer) issuer(host string) (string, bool) {
	port := strconv.Itoa(o.s.httpPort())
	h, p, err := net.SplitHostPort(host)
	if err != nil && o.s.TLS != nil && port == "443" {
		// A browser leaves out https's default port.
		h, p, err = strings.Trim(host, "[]"), port, nil
	}
	if err != nil || p != port {
		return "", false
	}
	ok := h == "127.0.0.1" || h == "localhost" || h == "::1"
	if o.s.TLS != nil && !ok {
		ok = certFor(o.s.TLS, h)
	}
	if !ok {
		return "", false
	}
	if o.s.TLS == nil {
		return "http://" + net.JoinHostPort(h, p), true
	}
	if p == "443" {
		if strings.Contains(h, ":") {
			h = "[" + h + "]"
		}
		return "https://" + h, true
	}
	return "https://" + net.JoinHostPort(h, p), true
}

func (o *oauthServer) metadata(w http.ResponseWriter, r *http.Request) {
	iss := issuerOf(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + "/cb/oauth/authorize",
		"token_endpoint":                                 iss + "/cocoonbox.oauth/token",
		"revocation_endpoint":                            iss + "/cocoonbox.oauth/revoke",
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"scopes_supported":                               []string{"account"},
		"authorization_response_iss_parameter_supported": true,
	})
}

func (o *oauthServer) page(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := pageFiles.ReadFile(name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Write(b)
	}
}

// console wraps a route of the owner's console: it needs a session.
func (o *oauthServer) console(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		account, ok := o.s.owner.sessionAccount(r.Header.Get(sessionHeader))
		if !ok {
			writeJSON(w, http.StatusUnauthorized, oauthError{Code: "login_required", Description: "sign in with your sign-in code for this local box"})
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, account)))
	}
}

func (o *oauthServer) signIn(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Code string `json:"code"`
	}
	if err := readJSON(r, &body); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{Code: "invalid_request", Description: err.Error()})
		return
	}
	s, err := o.signInCode(r, body.Code)
	if e, ok := errors.AsType[*guessLimitError](err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(e.seconds()))
		writeJSON(w, http.StatusTooManyRequests, oauthError{Code: "slow_down", Description: e.Error()})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusUnauthorized, oauthError{Code: "access_denied", Description: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"session": s})
}

// signInCode starts a console session with code, brought by r, and
// returns its secret. An account's code (`localbox account add`) signs its
// person in to their own account, the owner's the owner; both under one
// guess limit (owner.signIn).
func (o *oauthServer) signInCode(r *http.Request, code string) (string, error) {
	return o.s.owner.signIn(code, requestSource(r), func(code string) (string, bool) { return useAccountCode(o.s.Dir, code) })
}

// requestSource is the source r came from, for the guess limit: as
// sourceOfIP has it, but loopback is counted by user, not by address: a
// user of this machine (a box's, too) can connect from any of the 16
// million addresses of 127/8, and would otherwise have as many limits;
// and by user, the wrong codes a box user brings use up its own limit,
// never the owner's (Linux names the user of a socket of this machine:
// peerUID). Where no user is known, loopback is one source, "loopback".
func requestSource(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return sourceOfIP(ap.Addr())
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if local, err := netip.ParseAddrPort(la.String()); err == nil {
			if uid, ok := peerUID(local, ap); ok {
				return "loopback uid " + strconv.FormatUint(uint64(uid), 10)
			}
		}
	}
	return "loopback"
}

// parseRequest checks an authorization request's raw query.
func parseRequest(query string) (authRequest, *oauthError) {
	q, err := url.ParseQuery(query)
	if err != nil {
		return authRequest{}, &oauthError{"invalid_request", "the request is not a valid query", true}
	}
	for k, v := range q {
		if len(v) > 1 {
			return authRequest{}, &oauthError{"invalid_request", k + " is given more than once", true}
		}
	}
	req := authRequest{
		clientID:    q.Get("client_id"),
		redirectURI: q.Get("redirect_uri"),
		challenge:   q.Get("code_challenge"),
		deviceName:  q.Get("device_name"),
		state:       q.Get("state"),
	}
	if _, ok := firstParty[req.clientID]; !ok {
		return req, &oauthError{"invalid_client", "unknown client " + strconv.Quote(req.clientID), true}
	}
	if !loopbackRedirect(req.redirectURI) {
		return req, &oauthError{"invalid_request", "the redirect URI must be http://127.0.0.1:PORT/callback", true}
	}
	switch {
	case q.Get("response_type") != "code":
		return req, &oauthError{Code: "unsupported_response_type", Description: "response_type must be code"}
	case q.Get("code_challenge_method") != "S256" || !validChallenge(req.challenge):
		return req, &oauthError{Code: "invalid_request", Description: "PKCE with S256 and a 43-character code_challenge is required"}
	case q.Get("scope") != "" && q.Get("scope") != "account":
		return req, &oauthError{Code: "invalid_scope", Description: "a first-party client may ask only for account"}
	}
	if err := checkDeviceName(req.deviceName); err != "" {
		return req, &oauthError{Code: "invalid_request", Description: err}
	}
	return req, nil
}

func checkDeviceName(n string) string {
	switch {
	case n == "":
		return "device_name is missing"
	case len(n) > maxDeviceName:
		return "device_name is longer than 64 bytes"
	case !utf8.ValidString(n):
		return "device_name is not UTF-8"
	case strings.IndexFunc(n, unicode.IsControl) >= 0:
		return "device_name has control characters"
	}
	return ""
}

// loopbackRedirect reports whether u is http://127.0.0.1:PORT/callback,
// any port (RFC 8252 section 7.3), and nothing else.
func loopbackRedirect(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Path != "/callback" {
		return false
	}
	if u.Hostname() != "127.0.0.1" {
		return false
	}
	p, err := strconv.Atoi(u.Port())
	return err == nil && p > 0 && p < 65536
}

func validChallenge(c string) bool {
	if len(c) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil
}

// redirect is req's redirect URI with params, state and iss.
func redirect(req authRequest, iss string, params url.Values) string {
	if req.state != "" {
		params.Set("state", req.state)
	}
	params.Set("iss", iss)
	return req.redirectURI + "?" + params.Encode()
}

// checked reads the {query} body and checks it. On an error it answers:
// a fatal one with 400, any other with the redirect that takes the error
// back to the client.
func (o *oauthServer) checked(w http.ResponseWriter, r *http.Request) (authRequest, bool) {
	var body struct {
		Query string `json:"query"`
	}
	if err := readJSON(r, &body); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{Code: "invalid_request", Description: err.Error()})
		return authRequest{}, false
	}
	req, e := parseRequest(body.Query)
	if e == nil {
		return req, true
	}
	if e.fatal {
		writeJSON(w, http.StatusBadRequest, e)
		return req, false
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"error":             e.Code,
		"error_description": e.Description,
		"redirect":          redirect(req, issuerOf(r), url.Values{"error": {e.Code}, "error_description": {e.Description}}),
	})
	return req, false
}

func (o *oauthServer) check(w http.ResponseWriter, r *http.Request) {
	req, ok := o.checked(w, r)
	if !ok {
		return
	}
	u, _ := url.Parse(req.redirectURI)
	writeJSON(w, http.StatusOK, map[string]any{
		"client_id":     req.clientID,
		"client_name":   firstParty[req.clientID],
		"account":       true,
		"device_name":   req.deviceName,
		"redirect_host": u.Host,
		"loopback":      true,
	})
}

func (o *oauthServer) approve(w http.ResponseWriter, r *http.Request) {
	req, ok := o.checked(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"redirect": o.issueCode(req, issuerOf(r), accountOfRequest(r.Context()))})
}

// issueCode stores a one-use code for req, approved by account, and
// returns the redirect that takes it to the client.
func (o *oauthServer) issueCode(req authRequest, iss, account string) string {
	code := "cbc_" + randomHex(32)
	now := time.Now()
	o.mu.Lock()
	if o.codes == nil {
		o.codes = map[string]*authCode{}
	}
	for k, c := range o.codes {
		if now.After(c.expires) {
			delete(o.codes, k)
		}
	}
	o.codes[sum(code)] = &authCode{req: req, account: account, expires: now.Add(codeTTL)}
	o.mu.Unlock()
	o.s.logf("sign-in of %s on %q approved", req.clientID, req.deviceName)
	return redirect(req, iss, url.Values{"code": {code}})
}

func (o *oauthServer) deny(w http.ResponseWriter, r *http.Request) {
	req, ok := o.checked(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"redirect": o.denied(req, issuerOf(r))})
}

// denied returns the redirect that tells the client req was denied.
func (o *oauthServer) denied(req authRequest, iss string) string {
	o.s.logf("sign-in of %s on %q denied", req.clientID, req.deviceName)
	return redirect(req, iss, url.Values{"error": {"access_denied"}})
}

// token exchanges a code for a device token (RFC 6749 section 4.1.3 with
// RFC 7636's code_verifier). A code works once: brought again, it is
// refused and the token it gave is revoked (RFC 6749 section 4.1.2).
func (o *oauthServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{Code: "invalid_request", Description: "the body is not a form"})
		return
	}
	clientID := r.PostForm.Get("client_id")
	if u, _, ok := r.BasicAuth(); ok && clientID == "" {
		clientID = u
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		writeJSON(w, http.StatusBadRequest, oauthError{Code: "unsupported_grant_type", Description: "grant_type must be authorization_code"})
		return
	}
	grant := func(desc string) {
		writeJSON(w, http.StatusBadRequest, oauthError{Code: "invalid_grant", Description: desc})
	}
	// The code's use and the token's issue are one step under o.mu, so a
	// replay, even one that comes while the first exchange runs, finds the
	// token it must revoke.
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.codes[sum(r.PostForm.Get("code"))]
	if c == nil || time.Now().After(c.expires) {
		grant("the code is unknown or expired")
		return
	}
	if c.used {
		if id := c.tokenID; id != "" {
			o.s.toks.revoke(func(t TokenRecord) bool { return t.ID == id })
			o.s.logf("a code was brought twice; its token %s is revoked", id)
		}
		grant("the code was already used")
		return
	}
	c.used = true
	switch {
	case clientID != c.req.clientID:
		grant("the code was issued to another client")
		return
	case r.PostForm.Get("redirect_uri") != c.req.redirectURI:
		grant("redirect_uri does not match the authorization request")
		return
	case subtle.ConstantTimeCompare([]byte(oauth2.S256ChallengeFromVerifier(r.PostForm.Get("code_verifier"))), []byte(c.req.challenge)) != 1:
		grant("code_verifier does not match the code_challenge")
		return
	}
	tok, rec, err := o.s.toks.issue(c.req.deviceName, c.req.clientID, KindDevice, c.account)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, oauthError{Code: "server_error", Description: "could not store the token"})
		o.s.logf("issue a device token: %v", err)
		return
	}
	c.tokenID = rec.ID
	o.s.logf("device %s (%q, %s) signed in", rec.ID, rec.Name, rec.Client)
	writeJSON(w, http.StatusOK, map[string]string{"access_token": tok, "token_type": "Bearer", "scope": "account"})
}

// revoke is RFC 7009's endpoint: it revokes a device token, answers 200
// for a token it does not know, and leaves a personal token alone.
func (o *oauthServer) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("token") == "" {
		writeJSON(w, http.StatusBadRequest, oauthError{Code: "invalid_request", Description: "token is missing"})
		return
	}
	h := sum(r.PostForm.Get("token"))
	gone, err := o.s.toks.revoke(func(t TokenRecord) bool { return t.SHA256 == h && t.Kind == KindDevice })
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, oauthError{Code: "server_error", Description: "could not revoke the token"})
		return
	}
	for _, t := range gone {
		o.s.logf("device %s revoked by its client", t.ID)
	}
	w.WriteHeader(http.StatusOK)
}

func (o *oauthServer) devices(w http.ResponseWriter, r *http.Request) {
	type device struct {
		ID        string     `json:"id"`
		Client    string     `json:"client"`
		Label     string     `json:"label"`
		CreatedAt time.Time  `json:"created_at"`
		UsedAt    *time.Time `json:"used_at"`
	}
	out := []device{}
	for _, t := range o.s.toks.list() {
		if t.Account != accountOfRequest(r.Context()) {
			continue
		}
		d := device{ID: t.ID, Client: t.Client, Label: t.Name, CreatedAt: time.UnixMilli(t.CreatedAtMS).UTC()}
		if t.LastUsedAtMS != 0 {
			u := time.UnixMilli(t.LastUsedAtMS).UTC()
			d.UsedAt = &u
		}
		out = append(out, d)
	}
	writeJSON(w, http.StatusOK, out)
}

func (o *oauthServer) revokeDevice(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	gone, err := o.s.revokeDevice(accountOfRequest(r.Context()), id)
	switch {
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, oauthError{Code: "server_error", Description: "could not revoke the device"})
	case len(gone) == 0:
		writeJSON(w, http.StatusNotFound, oauthError{Code: "not_found", Description: "no device " + strconv.Quote(id)})
	default:
		o.s.logf("device %s revoked in the console", id)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (o *oauthServer) signOutEverywhere(w http.ResponseWriter, r *http.Request) {
	if _, err := o.s.signOutEverywhere(accountOfRequest(r.Context())); err != nil {
		writeJSON(w, http.StatusInternalServerError, oauthError{Code: "server_error", Description: "could not revoke the tokens"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func readJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return errors.New("the body must be application/json")
	}
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return errors.New("the body is not valid JSON")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func contextWithIssuer(r *http.Request, iss string) context.Context {
	return context.WithValue(r.Context(), issuerKey{}, iss)
}

// issuerOf is the issuer guard found for r.
func issuerOf(r *http.Request) string {
	s, _ := r.Context().Value(issuerKey{}).(string)
	return s
}
