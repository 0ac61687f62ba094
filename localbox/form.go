package localbox

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
)

// The sign-in page without a script (docs/login.md "Without JavaScript"):
// the page's two forms post to /cb/oauth/authorize itself, and the server
// answers with the next page, or 303 to the client's redirect at the end.
// It takes the same steps as the page's script through the JSON routes
// (owner.signIn, parseRequest, issueCode), so the same code and guess
// rules hold. A form, unlike the script's header, can be posted by any
// page, so each carries a CSRF token: an HMAC of the request's query under
// a key of this server, which only a page the server rendered holds; the
// session, after sign-in, travels in a hidden field, as the script sends
// it in a header, and never in a cookie (cookies are shared by every port
// of the host).

var authorizePage = template.Must(template.ParseFS(pageFiles, "page/authorize.html"))

// pageData is what authorize.html shows.
type pageData struct {
	Script  bool   // the script that takes the page over
	Action  string // where the forms post: the authorize URL with the request
	CSRF    string
	Message string
	SignIn  bool // the sign-in form is shown
	Consent *consentData
}

type consentData struct {
	Session      string
	Client       string // "cocoonbox CLI on NAME"
	RedirectHost string
}

// csrfToken is the token the forms of the page for query carry.
func (o *oauthServer) csrfToken(query string) string {
	m := hmac.New(sha256.New, o.csrfKey)
	m.Write([]byte("authorize\x00" + query))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// authorize is GET /cb/oauth/authorize: the page with its script, the
// sign-in form shown until the script decides.
func (o *oauthServer) authorize(w http.ResponseWriter, r *http.Request) {
	o.render(w, r, http.StatusOK, pageData{Script: true, SignIn: true, Message: "Sign in to continue."})
}

// form is POST /cb/oauth/authorize, a form of the page posted without its
// script: a sign-in code, or the answer to the consent question.
func (o *oauthServer) form(w http.ResponseWriter, r *http.Request) {
	query := r.URL.RawQuery
	if err := r.ParseForm(); err != nil || !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(o.csrfToken(query))) {
		o.render(w, r, http.StatusForbidden, pageData{SignIn: true, Message: "This form was not sent by this sign-in page; nothing was done. Sign in again."})
		return
	}
	session := r.PostForm.Get("session")
	if r.PostForm.Has("code") {
		s, err := o.signInCode(r, r.PostForm.Get("code"))
		if e, ok := errors.AsType[*guessLimitError](err); ok {
			w.Header().Set("Retry-After", strconv.Itoa(e.seconds()))
			o.render(w, r, http.StatusTooManyRequests, pageData{SignIn: true, Message: "Not signed in: " + e.Error() + "."})
			return
		}
		if err != nil {
			o.render(w, r, http.StatusUnauthorized, pageData{SignIn: true, Message: "Not signed in: " + err.Error() + "."})
			return
		}
		session = s
	}
	account, ok := o.s.owner.sessionAccount(session)
	if !ok {
		o.render(w, r, http.StatusUnauthorized, pageData{SignIn: true, Message: "Sign in to continue."})
		return
	}
	req, e := parseRequest(query)
	if e != nil && e.fatal {
		o.render(w, r, http.StatusBadRequest, pageData{Message: "This sign-in request is not valid: " + e.Description + "."})
		return
	}
	if e != nil {
		http.Redirect(w, r, redirect(req, issuerOf(r), url.Values{"error": {e.Code}, "error_description": {e.Description}}), http.StatusSeeOther)
		return
	}
	switch r.PostForm.Get("decision") {
	case "allow":
		http.Redirect(w, r, o.issueCode(req, issuerOf(r), account), http.StatusSeeOther)
	case "deny":
		http.Redirect(w, r, o.denied(req, issuerOf(r)), http.StatusSeeOther)
	default:
		u, _ := url.Parse(req.redirectURI)
		client := firstParty[req.clientID] + " on " + req.deviceName
		o.render(w, r, http.StatusOK, pageData{Consent: &consentData{Session: session, Client: client, RedirectHost: u.Host}})
	}
}

// render writes the page. Its forms may end in a redirect to the
// request's loopback client, which the page's form-action must allow (a
// browser holds a form's redirects to it too).
func (o *oauthServer) render(w http.ResponseWriter, r *http.Request, status int, d pageData) {
	query := r.URL.RawQuery
	d.Action = "/cb/oauth/authorize?" + query
	d.CSRF = o.csrfToken(query)
	formAction := "'self'"
	if q, err := url.ParseQuery(query); err == nil && loopbackRedirect(q.Get("redirect_uri")) {
		u, _ := url.Parse(q.Get("redirect_uri"))
		formAction += " http://" + u.Host
	}
	var b bytes.Buffer
	if err := authorizePage.Execute(&b, d); err != nil {
		http.Error(w, "the page could not be made", http.StatusInternalServerError)
		o.s.logf("authorize page: %v", err)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", contentPolicy(formAction))
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
