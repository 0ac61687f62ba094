package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// testEnv is an environment with HOME in a temporary directory.
func testEnv(t *testing.T, vars map[string]string) Env {
	home := t.TempDir()
	return Env{Getenv: func(k string) string {
		if k == "HOME" {
			return home
		}
		return vars[k]
	}}
}

// --no-browser prints the link and opens nothing; following it (here by
// hand, as the consent page's script does) signs in and saves a browser
// token for the endpoint.
func TestLoginNoBrowser(t *testing.T) {
	dir := t.TempDir()
	lis, base, err := localbox.Listen(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &localbox.Server{Dir: dir}
	if err := srv.CreateBox(localbox.DefaultBox); err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	opened := filepath.Join(t.TempDir(), "opened")
	env := testEnv(t, map[string]string{"COCOONBOX_ENDPOINT": base, "BROWSER": "touch " + opened})

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runLogin(env, Streams{In: strings.NewReader(""), Out: io.Discard, Err: pw}, loginOptions{NoBrowser: true})
		pw.Close()
		done <- err
	}()
	var link string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, base+auth.AuthorizePath+"?") {
			link = l
			break
		}
	}
	if link == "" {
		t.Fatalf("login printed no link: %v", <-done)
	}
	go io.Copy(io.Discard, pr)

	code, _ := localbox.SignInCode(dir)
	red, err := Consent(base, strings.SplitN(link, "?", 2)[1], code, "allow")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(red)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-done; err != nil {
		t.Fatalf("login: %v", err)
	}
	st, _ := env.store()
	c, err := st.Get(base)
	if err != nil || c.Source != auth.SourceBrowser {
		t.Fatalf("saved %+v, %v", c, err)
	}
	if _, err := os.Stat(opened); err == nil {
		t.Error("--no-browser opened the browser")
	}
}

// A browser token whose revoke fails is still deleted, and logout says so
// and exits 1.
func TestLogoutReportsFailedRevoke(t *testing.T) {
	const ep = "http://127.0.0.1:1"
	env := testEnv(t, map[string]string{"COCOONBOX_ENDPOINT": ep})
	st, _ := env.store()
	tok := "cb_" + strings.Repeat("ab", 32)
	if err := st.Put(ep, auth.Credential{Token: tok, Source: auth.SourceBrowser}); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	err := runLogout(env, Streams{Out: io.Discard, Err: &stderr}, logoutOptions{})
	if err == nil || !strings.Contains(err.Error(), "the saved token is deleted, but it could not be revoked") || !strings.Contains(err.Error(), "cocoonbox devices revoke") {
		t.Fatalf("logout: %v", err)
	}
	if strings.Contains(err.Error()+stderr.String(), tok) {
		t.Error("logout printed the token")
	}
	if _, err := st.Get(ep); !errors.Is(err, auth.ErrNoToken) {
		t.Errorf("the token is still saved: %v", err)
	}
}
