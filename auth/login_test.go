package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/oauth2"
)

// RFC 7636 appendix B: the octets, the verifier they encode to, and its
// S256 challenge.
func TestPKCEAppendixB(t *testing.T) {
	octets := []byte{116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173,
		187, 186, 22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83,
		132, 141, 121}
	const verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	const challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
	if got := base64.RawURLEncoding.EncodeToString(octets); got != verifier {
		t.Errorf("verifier = %q, want %q", got, verifier)
	}
	if got := oauth2.S256ChallengeFromVerifier(verifier); got != challenge {
		t.Errorf("challenge = %q, want %q", got, challenge)
	}
}

// The request a Flow makes carries the S256 challenge of its own verifier,
// a fresh state, the loopback redirect and the device name.
func TestFlowAuthURL(t *testing.T) {
	f, err := Start("http://127.0.0.1:9", "laptop", FlowOptions{Invite: "cbi_x"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, err := url.Parse(f.AuthURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	want := map[string]string{
		"response_type":         "code",
		"client_id":             ClientID,
		"redirect_uri":          f.RedirectURL(),
		"scope":                 Scope,
		"code_challenge_method": "S256",
		"code_challenge":        oauth2.S256ChallengeFromVerifier(f.verifier),
		"device_name":           "laptop",
		"invite":                "cbi_x",
		"state":                 f.state,
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, q.Get(k), v)
		}
	}
	if u.Scheme+"://"+u.Host+u.Path != "http://127.0.0.1:9"+AuthorizePath {
		t.Errorf("authorize URL %s", f.AuthURL())
	}
	if !strings.HasPrefix(f.RedirectURL(), "http://127.0.0.1:") || !strings.HasSuffix(f.RedirectURL(), "/callback") {
		t.Errorf("redirect %s", f.RedirectURL())
	}
	if len(f.verifier) != 43 || len(f.state) < 43 {
		t.Errorf("verifier %d chars, state %d chars", len(f.verifier), len(f.state))
	}
	g, _ := Start("http://127.0.0.1:9", "laptop", FlowOptions{})
	defer g.Close()
	if g.verifier == f.verifier || g.state == f.state || g.RedirectURL() == f.RedirectURL() {
		t.Error("two flows share a verifier, a state or a port")
	}
}

func TestDeviceName(t *testing.T) {
	long := strings.Repeat("é", 40) // 80 bytes
	for _, tc := range []struct{ in, want string }{
		{"laptop", "laptop"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), strings.Repeat("a", 64)},
		{long, strings.Repeat("é", 32)},
		{"a" + long, "a" + strings.Repeat("é", 31)},
		{"evil\x1b[2Jhost\n", "evil[2Jhost"},
		{"", "unnamed"},
		{"\xff\xfe", "unnamed"},
	} {
		got := DeviceName(tc.in)
		if got != tc.want || len(got) > MaxDeviceName || !utf8.ValidString(got) {
			t.Errorf("DeviceName(%q) = %q (%d bytes), want %q", tc.in, got, len(got), tc.want)
		}
	}
	if _, err := Start("http://127.0.0.1:9", strings.Repeat("a", 65), FlowOptions{}); err == nil {
		t.Error("Start with a 65-byte device name succeeded")
	}
}

// answerWith starts a flow, brings it the answer q (state and iss filled
// in from the flow unless q sets them), and returns Wait's result and the
// status the browser got.
func answerWith(t *testing.T, q url.Values) (*Flow, string, error, int) {
	t.Helper()
	f, err := Start("http://127.0.0.1:9", "laptop", FlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, ok := q["state"]; !ok {
		q.Set("state", f.state)
	}
	if _, ok := q["iss"]; !ok {
		q.Set("iss", "http://127.0.0.1:9")
	}
	type res struct {
		tok string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		tok, err := f.Wait(context.Background())
		ch <- res{tok, err}
	}()
	resp, err := http.Get(f.RedirectURL() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r := <-ch
	return f, r.tok, r.err, resp.StatusCode
}

func TestFlowChecksAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    url.Values
		want error
	}{
		{"wrong state", url.Values{"state": {"forged"}, "code": {"c"}}, ErrStateMismatch},
		{"no state", url.Values{"state": nil, "code": {"c"}}, ErrStateMismatch},
		{"wrong iss", url.Values{"iss": {"https://evil.example"}, "code": {"c"}}, ErrIssuerMismatch},
		{"no iss", url.Values{"iss": nil, "code": {"c"}}, ErrIssuerMismatch},
		{"denied", url.Values{"error": {"access_denied"}}, ErrDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, tok, err, status := answerWith(t, tc.q)
			if !errors.Is(err, tc.want) || tok != "" {
				t.Errorf("Wait = %q, %v; want %v", tok, err, tc.want)
			}
			if status != http.StatusBadRequest {
				t.Errorf("the browser got %d, want 400", status)
			}
		})
	}
}

// Only the first answer at the loopback port counts: the same code brought
// again is refused there, and never sent to the token endpoint.
func TestFlowRefusesSecondAnswer(t *testing.T) {
	f, _, err, _ := answerWith(t, url.Values{"error": {"access_denied"}})
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("first answer: %v", err)
	}
	// Wait has returned and closed the port; a replay cannot reach it.
	if resp, err := http.Get(f.RedirectURL() + "?code=c&state=" + f.state); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("a replayed answer got %s", resp.Status)
		}
	}
}

// An error from the server other than a denial is reported with its code
// and description, control characters dropped.
func TestFlowReportsServerError(t *testing.T) {
	_, _, err, _ := answerWith(t, url.Values{"error": {"invalid_request"}, "error_description": {"device_name is too long\x1b[31m"}})
	if err == nil || !strings.Contains(err.Error(), "invalid_request: device_name is too long[31m") {
		t.Errorf("err = %v", err)
	}
}

// A pasted answer goes through the same checks as one at the loopback
// port; what is not an answer of this flow is refused and the flow waits
// on; the first answer, pasted or at the port, is the only one.
func TestFlowPaste(t *testing.T) {
	f, err := Start("http://127.0.0.1:9", "laptop", FlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	for _, bad := range []string{
		"",
		"https://example.com/callback?code=c&state=" + f.state,
		"abcdef0123456789",
		"http://127.0.0.1:1/callback?code=c&state=" + f.state,
		f.RedirectURL() + "?code=c",
		"not a url at all",
	} {
		if err := f.Paste(ctx, bad); !errors.Is(err, ErrNotAnswer) {
			t.Errorf("Paste(%q) = %v, want ErrNotAnswer", bad, err)
		}
	}
	if err := f.Paste(ctx, "abcdef0123456789"); err == nil || !strings.Contains(err.Error(), "a code alone cannot be checked") {
		t.Errorf("a code alone: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := f.Wait(ctx); done <- err }()
	// A wrong iss, pasted: the answer counts, and fails the check.
	q := url.Values{"code": {"c"}, "state": {f.state}, "iss": {"https://evil.example"}}
	if err := f.Paste(ctx, "  "+f.RedirectURL()+"?"+q.Encode()+"\r\n"); err != nil {
		t.Fatalf("Paste: %v", err)
	}
	if err := <-done; !errors.Is(err, ErrIssuerMismatch) {
		t.Errorf("Wait = %v, want ErrIssuerMismatch", err)
	}
	q.Set("iss", "http://127.0.0.1:9")
	if err := f.Paste(ctx, f.RedirectURL()+"?"+q.Encode()); err == nil || errors.Is(err, ErrNotAnswer) {
		t.Errorf("a second answer: %v", err)
	}
	g, _ := Start("http://127.0.0.1:9", "laptop", FlowOptions{})
	defer g.Close()
	go func() { _, err := g.Wait(ctx); done <- err }()
	q = url.Values{"code": {"c"}, "state": {"forged"}, "iss": {"http://127.0.0.1:9"}}
	g.Paste(ctx, g.RedirectURL()+"?"+q.Encode())
	if err := <-done; !errors.Is(err, ErrStateMismatch) {
		t.Errorf("wrong state pasted: %v, want ErrStateMismatch", err)
	}
}

// Probe says when nothing answers; any HTTP answer will do.
func TestProbe(t *testing.T) {
	if err := Probe(context.Background(), "http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("Probe of a closed port: %v", err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if err := Probe(context.Background(), srv.URL); err != nil {
		t.Errorf("Probe of a 404: %v", err)
	}
}
