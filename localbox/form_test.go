package localbox_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/internal/formtest"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// flow starts a CLI's sign-in at base and returns it with a channel of
// what its Wait returns.
func flow(t *testing.T, base, device string) (*auth.Flow, <-chan error, *string) {
	t.Helper()
	f, err := auth.Start(base, device, auth.FlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	done := make(chan error, 1)
	var tok string
	go func() {
		var err error
		tok, err = f.Wait(context.Background())
		done <- err
	}()
	return f, done, &tok
}

// consentPage signs in on the page at link with code through its form, as
// a browser without a script does, and returns the consent page.
func consentPage(t *testing.T, b *formtest.Browser, link, code string) *formtest.Page {
	t.Helper()
	p, err := b.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.Form("signin")
	if err != nil {
		t.Fatalf("the page without its script: %v", err)
	}
	f.Values.Set("code", code)
	p, err = b.Submit(f, "signin-submit")
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != http.StatusOK || !p.Visible("consent") {
		t.Fatalf("after the sign-in form: %d, %q", p.Status, p.Text("message"))
	}
	return p
}

// The page works without its script: the sign-in form and the consent
// form post to the server, and Allow ends at the CLI's loopback port with
// a code the CLI exchanges; Deny ends there too, and nothing is issued.
// No cookie is set on the way.
func TestSignInWithoutScript(t *testing.T) {
	base, dir := serve(t)
	for _, action := range []string{"allow", "deny"} {
		t.Run(action, func(t *testing.T) {
			f, done, tok := flow(t, base, "headless "+action)
			code, err := localbox.SignInCode(dir)
			if err != nil {
				t.Fatal(err)
			}
			b := formtest.New()
			p := consentPage(t, b, f.AuthURL(), code)
			if q := p.Text("question"); q != "Sign in the cocoonbox CLI on headless "+action+"?" {
				t.Errorf("question %q", q)
			}
			port := strings.TrimPrefix(p.Text("redirect"), "127.0.0.1:")
			if csp := p.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' http://127.0.0.1:"+port+";") {
				t.Errorf("the consent page's policy does not let its form go on to the client: %s", csp)
			}
			consent, err := p.Form("consent")
			if err != nil {
				t.Fatal(err)
			}
			p, err = b.Submit(consent, action)
			if err != nil {
				t.Fatal(err)
			}
			if p.URL.Host != "127.0.0.1:"+port || p.URL.Path != "/callback" {
				t.Errorf("ended at %s, not the CLI's loopback port %s", p.URL, port)
			}
			err = <-done
			if action == "deny" {
				if !errors.Is(err, auth.ErrDenied) {
					t.Fatalf("Wait = %v, want ErrDenied", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dial(t, base, *tok).List(t.Context()); err != nil {
				t.Fatalf("List with the token: %v", err)
			}
			u, _ := url.Parse(base)
			if c := b.Client.Jar.Cookies(u); len(c) != 0 {
				t.Errorf("cookies set: %v", c)
			}
			if code2, _ := localbox.SignInCode(dir); code2 == code {
				t.Error("the code still works after its use")
			}
		})
	}
}

// What the page's script is refused, its forms are refused too: a wrong
// code (401, the code unchanged); a form whose CSRF token is wrong or is
// another request's (403, the code not even compared, so a right one
// stays unused); a consent without a live session (401, back to the
// sign-in form, no code issued).
func TestSignInFormRefusals(t *testing.T) {
	base, dir := serve(t)
	f, done, _ := flow(t, base, "headless")
	code, err := localbox.SignInCode(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := formtest.New()
	signInForm := func() *formtest.Form {
		t.Helper()
		p, err := b.Get(f.AuthURL())
		if err != nil {
			t.Fatal(err)
		}
		form, err := p.Form("signin")
		if err != nil {
			t.Fatal(err)
		}
		return form
	}

	// A wrong code: as the JSON route answers it.
	form := signInForm()
	form.Values.Set("code", "AAAAA-AAAAA")
	p, err := b.Submit(form, "signin-submit")
	if err != nil {
		t.Fatal(err)
	}
	st, m := call(t, base, "/cb/api/session", "", map[string]string{"code": "AAAAA-AAAAA"})
	if p.Status != http.StatusUnauthorized || st != http.StatusUnauthorized || p.Text("message") != "Not signed in: "+m["error_description"].(string)+"." {
		t.Errorf("wrong code: form %d %q; JSON %d %v", p.Status, p.Text("message"), st, m)
	}
	if !p.Visible("signin") || p.Visible("consent") {
		t.Error("a wrong code does not lead back to the sign-in form")
	}

	// The right code with a wrong CSRF token, or another request's.
	other, _ := url.Parse(f.AuthURL())
	q := other.Query()
	q.Set("state", "another")
	other.RawQuery = q.Encode()
	op, err := b.Get(other.String())
	if err != nil {
		t.Fatal(err)
	}
	otherForm, err := op.Form("signin")
	if err != nil {
		t.Fatal(err)
	}
	for name, csrf := range map[string]string{"wrong": "x" + form.Values.Get("csrf"), "missing": "", "another request's": otherForm.Values.Get("csrf")} {
		form := signInForm()
		form.Values.Set("code", code)
		form.Values.Set("csrf", csrf)
		p, err := b.Submit(form, "signin-submit")
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != http.StatusForbidden || p.Visible("consent") {
			t.Errorf("%s CSRF token: %d %q", name, p.Status, p.Text("message"))
		}
		if now, _ := localbox.SignInCode(dir); now != code {
			t.Fatalf("%s CSRF token: the code was used", name)
		}
	}

	// Signed in, a consent with a session that is not live, or with a
	// wrong CSRF token, issues nothing.
	p = consentPage(t, b, f.AuthURL(), code)
	for name, set := range map[string][2]string{"no session": {"session", ""}, "a wrong session": {"session", "cbs_0"}, "a wrong CSRF token": {"csrf", "x"}} {
		consent, err := p.Form("consent")
		if err != nil {
			t.Fatal(err)
		}
		consent.Values.Set(set[0], set[1])
		r, err := b.Submit(consent, "allow")
		if err != nil {
			t.Fatal(err)
		}
		want := http.StatusUnauthorized
		if set[0] == "csrf" {
			want = http.StatusForbidden
		}
		if r.Status != want || r.URL.Path != "/cb/oauth/authorize" || !r.Visible("signin") {
			t.Errorf("allow with %s: %d at %s", name, r.Status, r.URL)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the CLI got an answer: %v", err)
	default:
	}

	// A request the page must not answer to its client: the message, no
	// redirect.
	bad, _ := url.Parse(f.AuthURL())
	q = bad.Query()
	q.Set("client_id", "evil")
	bad.RawQuery = q.Encode()
	code, _ = localbox.SignInCode(dir)
	bp, err := b.Get(bad.String())
	if err != nil {
		t.Fatal(err)
	}
	form, err = bp.Form("signin")
	if err != nil {
		t.Fatal(err)
	}
	form.Values.Set("code", code)
	if bp, err = b.Submit(form, "signin-submit"); err != nil {
		t.Fatal(err)
	}
	if bp.Status != http.StatusBadRequest || !strings.Contains(bp.Text("message"), `unknown client "evil"`) {
		t.Errorf("unknown client: %d %q", bp.Status, bp.Text("message"))
	}
}
