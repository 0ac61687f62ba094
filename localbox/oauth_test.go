package localbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// serve starts a local box on loopback TCP and returns its endpoint URL
// and state directory.
func serve(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	lis, u, err := localbox.Listen(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	run(t, &localbox.Server{Dir: dir, Logf: t.Logf}, lis)
	return u, dir
}

// run serves lis with srv until the test ends.
func run(t *testing.T, srv *localbox.Server, lis net.Listener) {
	t.Helper()
	// CreateBox readies the server, sign-in code included, before Serve.
	if err := srv.CreateBox(localbox.DefaultBox); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// call posts body as JSON to path with the console session sess and
// decodes the answer into a map.
func call(t *testing.T, base, path, sess string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if sess != "" {
		req.Header.Set("X-Cocoonbox-Session", sess)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// signIn signs in as the owner with the code from the state directory.
func signIn(t *testing.T, base, dir string) string {
	t.Helper()
	code, err := localbox.SignInCode(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, m := call(t, base, "/cb/api/session", "", map[string]string{"code": code})
	if st != http.StatusOK {
		t.Fatalf("sign in: %d %v", st, m)
	}
	return m["session"].(string)
}

// login runs a whole sign-in the way the consent page does, with action
// "approve" or "deny", and returns what Flow.Wait returned.
func login(t *testing.T, base, sess, device, action string) (string, error) {
	t.Helper()
	f, err := auth.Start(base, device, auth.FlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type res struct {
		tok string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		tok, err := f.Wait(context.Background())
		ch <- res{tok, err}
	}()
	query := strings.SplitN(f.AuthURL(), "?", 2)[1]
	st, m := call(t, base, "/cb/api/oauth/check", sess, map[string]string{"query": query})
	if st != http.StatusOK || m["device_name"] != device || m["client_name"] != "cocoonbox CLI" || m["account"] != true {
		t.Fatalf("check: %d %v", st, m)
	}
	st, m = call(t, base, "/cb/api/oauth/"+action, sess, map[string]string{"query": query})
	if st != http.StatusOK {
		t.Fatalf("%s: %d %v", action, st, m)
	}
	resp, err := http.Get(m["redirect"].(string))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := <-ch
	return r.tok, r.err
}

func dial(t *testing.T, base, tok string) *box.Client {
	t.Helper()
	ep, err := box.ParseEndpoint(base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := box.Dial(ep, tok)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A whole sign-in: the token works over gRPC at the same address as the
// pages, the device is listed as the caller, and only its sha256 is kept.
func TestSignIn(t *testing.T) {
	base, dir := serve(t)
	sess := signIn(t, base, dir)
	tok, err := login(t, base, sess, "laptop é", "approve")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c := dial(t, base, tok)
	if _, err := c.List(ctx); err != nil {
		t.Fatalf("List with the device token: %v", err)
	}
	devs, err := c.ListDevices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].Name != "laptop é" || devs[0].Client != auth.ClientID || !devs[0].Current {
		t.Fatalf("devices = %+v", devs)
	}
	minute := time.Now().Truncate(time.Minute).UnixMilli()
	if u := devs[0].LastUsedAtMS; u%60000 != 0 || u < minute-60000 || u > minute {
		t.Errorf("last use %d is not this minute (%d)", u, minute)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(tok)) || bytes.Contains(b, []byte(tok[3:])) {
		t.Error("tokens.json holds the token itself")
	}
	if fi, _ := os.Stat(filepath.Join(dir, "tokens.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens.json mode %o", fi.Mode().Perm())
	}
	// The metadata names this server as the issuer.
	resp, err := http.Get(base + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	json.NewDecoder(resp.Body).Decode(&md)
	resp.Body.Close()
	if md["issuer"] != base || md["token_endpoint"] != base+"/cocoonbox.oauth/token" {
		t.Errorf("metadata %v", md)
	}
}

func TestDeny(t *testing.T) {
	base, dir := serve(t)
	sess := signIn(t, base, dir)
	tok, err := login(t, base, sess, "laptop", "deny")
	if !errors.Is(err, auth.ErrDenied) || tok != "" {
		t.Fatalf("login = %q, %v; want ErrDenied", tok, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "tokens.json"))
	if bytes.Contains(b, []byte("laptop")) {
		t.Error("a denied sign-in left a token")
	}
}

// approveCode approves a request made from verifier and returns its code.
func approveCode(t *testing.T, base, sess string, q url.Values) string {
	t.Helper()
	st, m := call(t, base, "/cb/api/oauth/approve", sess, map[string]string{"query": q.Encode()})
	if st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, m)
	}
	u, _ := url.Parse(m["redirect"].(string))
	if u.Query().Get("iss") != base || u.Query().Get("state") != q.Get("state") {
		t.Fatalf("redirect %s", u)
	}
	return u.Query().Get("code")
}

func request(verifier, device string) url.Values {
	return url.Values{
		"response_type": {"code"}, "client_id": {auth.ClientID},
		"redirect_uri": {"http://127.0.0.1:1/callback"}, "scope": {"account"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"},
		"state": {"s1"}, "device_name": {device},
	}
}

func exchange(t *testing.T, base, code, verifier string) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(base+"/cocoonbox.oauth/token", url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "client_id": {auth.ClientID},
		"redirect_uri": {"http://127.0.0.1:1/callback"}, "code_verifier": {verifier},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// A code works once; brought again it is refused and the token it gave is
// revoked. A wrong verifier gets nothing.
func TestCodeReplay(t *testing.T) {
	base, dir := serve(t)
	sess := signIn(t, base, dir)
	v := oauth2.GenerateVerifier()
	code := approveCode(t, base, sess, request(v, "laptop"))
	st, m := exchange(t, base, code, v)
	tok, _ := m["access_token"].(string)
	if st != http.StatusOK || !auth.ValidToken(tok) || m["token_type"] != "Bearer" || m["scope"] != "account" || m["expires_in"] != nil || m["refresh_token"] != nil {
		t.Fatalf("token: %d %v", st, m)
	}
	c := dial(t, base, tok)
	if _, err := c.List(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, m = exchange(t, base, code, v)
	if st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Fatalf("replay: %d %v", st, m)
	}
	if _, err := c.List(t.Context()); !errors.Is(err, box.ErrUnauthenticated) {
		t.Fatalf("the replayed code's token still works: %v", err)
	}

	code = approveCode(t, base, sess, request(v, "laptop"))
	if st, m := exchange(t, base, code, oauth2.GenerateVerifier()); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Fatalf("wrong verifier: %d %v", st, m)
	}
	if st, m := exchange(t, base, code, v); st != http.StatusBadRequest {
		t.Fatalf("the code worked after a wrong verifier: %d %v", st, m)
	}
}

// A code brought several times at once: one request gets a token, every
// other is refused, and the token is revoked, however the requests
// interleave.
func TestCodeReplayConcurrent(t *testing.T) {
	base, dir := serve(t)
	sess := signIn(t, base, dir)
	for trial := range 5 {
		v := oauth2.GenerateVerifier()
		code := approveCode(t, base, sess, request(v, "laptop"))
		const n = 8
		type answer struct {
			st int
			m  map[string]any
		}
		answers := make(chan answer, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				<-start
				st, m := exchange(t, base, code, v)
				answers <- answer{st, m}
			})
		}
		close(start)
		wg.Wait()
		close(answers)
		var toks []string
		for a := range answers {
			switch {
			case a.st == http.StatusOK:
				toks = append(toks, a.m["access_token"].(string))
			case a.st != http.StatusBadRequest || a.m["error"] != "invalid_grant":
				t.Fatalf("trial %d: %d %v", trial, a.st, a.m)
			}
		}
		if len(toks) != 1 {
			t.Fatalf("trial %d: %d tokens for one code", trial, len(toks))
		}
		c := dial(t, base, toks[0])
		if _, err := c.List(t.Context()); !errors.Is(err, box.ErrUnauthenticated) {
			t.Fatalf("trial %d: the replayed code's token still works: %v", trial, err)
		}
	}
}

// Requests the server does not serve: the untrusted ones are a 400 the
// page shows, the others go back to the client with an OAuth error.
func TestAuthorizeRequestChecks(t *testing.T) {
	base, dir := serve(t)
	sess := signIn(t, base, dir)
	v := oauth2.GenerateVerifier()
	for _, tc := range []struct {
		name  string
		edit  func(url.Values)
		fatal bool
		code  string
	}{
		{"device name of 65 bytes", func(q url.Values) { q.Set("device_name", strings.Repeat("a", 65)) }, false, "invalid_request"},
		{"device name with an escape", func(q url.Values) { q.Set("device_name", "a\x1b[2Jb") }, false, "invalid_request"},
		{"no device name", func(q url.Values) { q.Del("device_name") }, false, "invalid_request"},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }, false, "invalid_request"},
		{"no PKCE", func(q url.Values) { q.Del("code_challenge") }, false, "invalid_request"},
		{"token response", func(q url.Values) { q.Set("response_type", "token") }, false, "unsupported_response_type"},
		{"scope boxes", func(q url.Values) { q.Set("scope", "boxes") }, false, "invalid_scope"},
		{"unknown client", func(q url.Values) { q.Set("client_id", "evil") }, true, "invalid_client"},
		{"remote redirect", func(q url.Values) { q.Set("redirect_uri", "http://evil.example/callback") }, true, "invalid_request"},
		{"https redirect", func(q url.Values) { q.Set("redirect_uri", "https://127.0.0.1:1/callback") }, true, "invalid_request"},
		{"localhost redirect", func(q url.Values) { q.Set("redirect_uri", "http://localhost:1/callback") }, true, "invalid_request"},
		{"other path", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:1/x") }, true, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := request(v, "laptop")
			tc.edit(q)
			for _, path := range []string{"check", "approve"} {
				st, m := call(t, base, "/cb/api/oauth/"+path, sess, map[string]string{"query": q.Encode()})
				if m["error"] != tc.code {
					t.Errorf("%s: error %v, want %s", path, m["error"], tc.code)
				}
				red, _ := m["redirect"].(string)
				if tc.fatal {
					if st != http.StatusBadRequest || red != "" {
						t.Errorf("%s: %d, redirect %q; want 400 and none", path, st, red)
					}
					continue
				}
				u, _ := url.Parse(red)
				if !strings.HasPrefix(red, "http://127.0.0.1:1/callback?") || u.Query().Get("error") != tc.code || u.Query().Get("code") != "" || u.Query().Get("iss") != base {
					t.Errorf("%s: redirect %q", path, red)
				}
			}
		})
	}
	// Without the owner's session, nothing is answered.
	if st, _ := call(t, base, "/cb/api/oauth/approve", "", map[string]string{"query": request(v, "x").Encode()}); st != http.StatusUnauthorized {
		t.Errorf("approve without a session: %d", st)
	}
	if st, _ := call(t, base, "/cb/api/oauth/approve", "cbs_forged", map[string]string{"query": request(v, "x").Encode()}); st != http.StatusUnauthorized {
		t.Errorf("approve with a forged session: %d", st)
	}
}

// The sign-in code works once. Wrong tries do not replace it
// (TestSignInGuessLimit).
func TestOwnerSignIn(t *testing.T) {
	base, dir := serve(t)
	code, _ := localbox.SignInCode(dir)
	if fi, _ := os.Stat(localbox.SignInCodePath(dir)); fi.Mode().Perm() != 0o600 {
		t.Errorf("signin-code mode %o", fi.Mode().Perm())
	}
	if st, _ := call(t, base, "/cb/api/session", "", map[string]string{"code": strings.ToLower(code)}); st != http.StatusOK {
		t.Fatalf("the code in lower case: %d", st)
	}
	if st, _ := call(t, base, "/cb/api/session", "", map[string]string{"code": code}); st != http.StatusUnauthorized {
		t.Fatalf("the code used twice: %d", st)
	}
	next, _ := localbox.SignInCode(dir)
	if next == code {
		t.Fatal("the code did not change after its use")
	}
	if st, _ := call(t, base, "/cb/api/session", "", map[string]string{"code": next}); st != http.StatusOK {
		t.Fatalf("the new code: %d", st)
	}
}

// A request under a name that is not loopback (DNS rebinding) is refused.
func TestHostGuard(t *testing.T) {
	base, _ := serve(t)
	for host, want := range map[string]int{"evil.example": 421, "evil.example:" + strings.Split(base, ":")[2]: 421, "127.0.0.1:1": 421, strings.TrimPrefix(base, "http://"): 200} {
		req, _ := http.NewRequest(http.MethodGet, base+"/cb/oauth/authorize", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
		if want == 200 && (resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")) {
			t.Errorf("the consent page can be framed: %v", resp.Header)
		}
	}
}

// The revoke endpoint revokes a device token, answers 200 for one it does
// not know, and leaves a personal token alone.
func TestRevokeEndpoint(t *testing.T) {
	base, dir := serve(t)
	personal, err := localbox.IssueToken(dir, "localbox", "cli")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := login(t, base, signIn(t, base, dir), "laptop", "approve")
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range []string{tok, personal, "cb_" + strings.Repeat("0", 64), "junk"} {
		if err := auth.Revoke(t.Context(), nil, base, tk); err != nil {
			t.Errorf("revoke: %v", err)
		}
	}
	if _, err := dial(t, base, tok).List(t.Context()); !errors.Is(err, box.ErrUnauthenticated) {
		t.Errorf("the revoked device token: %v", err)
	}
	if _, err := dial(t, base, personal).List(t.Context()); err != nil {
		t.Errorf("the personal token: %v", err)
	}
}

// The revocation endpoint answers anyone, with no token: a token it does
// not know changes nothing, so a flood of them writes nothing. Each
// rewrote and synced tokens.json under its lock before, so that anyone
// who could reach the port could keep root's disk busy and hold up every
// sign-in.
func TestRevokeUnknownWritesNothing(t *testing.T) {
	base, dir := serve(t)
	if _, err := localbox.IssueToken(dir, "localbox", "cli"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tokens.json")
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		for _, tk := range []string{"cb_" + strings.Repeat("0", 63) + string(rune('a'+i%6)), "junk"} {
			if err := auth.Revoke(t.Context(), nil, base, tk); err != nil {
				t.Fatalf("revoke: %v", err)
			}
		}
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("revoking unknown tokens rewrote %s (%v, then %v)", path, before.ModTime(), after.ModTime())
	}
}

// Every open call on a revoked token ends with UNAUTHENTICATED, whichever
// way it was revoked; other tokens' calls go on.
func TestRevokeEndsOpenCalls(t *testing.T) {
	base, dir := serve(t)
	personal, _ := localbox.IssueToken(dir, "localbox", "cli")
	admin := dial(t, base, personal)
	for _, how := range []string{"RevokeDevice", "revoke endpoint", "SignOutEverywhere"} {
		t.Run(how, func(t *testing.T) {
			tok, err := login(t, base, signIn(t, base, dir), "laptop", "approve")
			if err != nil {
				t.Fatal(err)
			}
			c := dial(t, base, tok)
			pr, pw := io.Pipe()
			started := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := c.Exec(context.Background(), &box.Command{
					Box: "main", Line: "echo up; exec sleep 600",
					Stdin: pr, Stdout: notify{started}, Stderr: io.Discard,
				})
				done <- err
			}()
			<-started
			switch how {
			case "RevokeDevice":
				devs, _ := admin.ListDevices(t.Context())
				for _, d := range devs {
					if d.Name == "laptop" {
						if err := admin.RevokeDevice(t.Context(), d.ID); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := admin.RevokeDevice(t.Context(), "dev_0000000000000000"); !errors.Is(err, box.ErrNotFound) {
					t.Errorf("revoking an unknown device: %v", err)
				}
			case "revoke endpoint":
				if err := auth.Revoke(t.Context(), nil, base, tok); err != nil {
					t.Fatal(err)
				}
			case "SignOutEverywhere":
				n, err := c.SignOutEverywhere(t.Context())
				if err != nil || n != 2 {
					t.Fatalf("SignOutEverywhere = %d, %v; want 2 tokens", n, err)
				}
			}
			err = <-done
			pw.Close()
			if !errors.Is(err, box.ErrUnauthenticated) || !strings.Contains(err.Error(), "revoked") {
				t.Fatalf("the open Exec ended with %v, want UNAUTHENTICATED: the token was revoked", err)
			}
		})
	}
}

// notify closes its channel at the first write.
type notify struct{ c chan struct{} }

func (n notify) Write(p []byte) (int, error) {
	select {
	case <-n.c:
	default:
		close(n.c)
	}
	return len(p), nil
}
