package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const payload = "https://example.com/x?a=1&calc|whoami^%PATH%"

// The payload's URL is one argv element on every platform, normalized so
// that neither a shell nor cmd.exe would read it, and cmd is never run.
func TestOpenCommandOneElement(t *testing.T) {
	const norm = "https://example.com/x?a=1&calc%7Cwhoami%5E%25PATH%25"
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		goos    string
		browser string
		want    []string
	}{
		{"linux", "", []string{"xdg-open", norm}},
		{"freebsd", "", []string{"xdg-open", norm}},
		{"darwin", "", []string{"open", norm}},
		{"windows", "", []string{"rundll32", "url.dll,FileProtocolHandler", norm}},
		{"linux", "firefox", []string{"firefox", norm}},
		{"linux", "chromium --new-window:firefox", []string{"chromium", "--new-window", norm}},
		{"linux", "w3m %s -o x", []string{"w3m", norm, "-o", "x"}},
		{"darwin", "open -a Safari", []string{"open", "-a", "Safari", norm}},
		{"windows", `C:\b\chrome.exe;other`, []string{`C:\b\chrome.exe`, norm}},
	} {
		got, err := OpenCommand(tc.goos, env(map[string]string{"BROWSER": tc.browser}), payload)
		if err != nil {
			t.Errorf("%s BROWSER=%q: %v", tc.goos, tc.browser, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s BROWSER=%q: argv (-want +got):\n%s", tc.goos, tc.browser, d)
		}
		n := 0
		for _, a := range got {
			if strings.Contains(a, "example.com") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: the URL is in %d argv elements", tc.goos, n)
		}
		if c := strings.ToLower(filepath.Base(strings.ReplaceAll(got[0], `\`, "/"))); c == "cmd" || c == "cmd.exe" || c == "sh" {
			t.Errorf("%s: opener is %s", tc.goos, got[0])
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://example.com/a?b=c%20d#e", "https://example.com/a?b=c%20d#e"},
		{"http://127.0.0.1:8/cb/oauth/authorize?x=1&y=a b", "http://127.0.0.1:8/cb/oauth/authorize?x=1&y=a%20b"},
		{"https://example.com/\"'`<>\\{}", "https://example.com/%22'%60%3C%3E%5C%7B%7D"},
		{"https://example.com/é", "https://example.com/%C3%A9"},
	} {
		got, err := NormalizeURL(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"file:///etc/passwd", "javascript:alert(1)", "calc.exe", "https://u:p@example.com/", "https:///x", "ms-settings:"} {
		if got, err := NormalizeURL(bad); err == nil {
			t.Errorf("NormalizeURL(%q) = %q, want an error", bad, got)
		}
	}
}

// A real opener script gets exactly one argument, and none of the
// payloads a shell would run does anything.
func TestOpenRunsNoPayload(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "argv")
	script := filepath.Join(dir, "opener")
	// The script records its arguments, one per line, then its count.
	body := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> " + out + "; done\nprintf '%s' \"$COCOONBOX_TOKEN\" > " + out + ".tok\necho \"$#\" > " + out + ".n\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	pwned := filepath.Join(dir, "pwned")
	for _, u := range []string{
		payload,
		"https://example.com/?q=1;touch$IFS" + pwned + "&r=$(touch$IFS" + pwned + ")",
		"https://example.com/?q=`touch " + pwned + "`|touch " + pwned + "&&touch " + pwned,
	} {
		os.Remove(out)
		os.Remove(out + ".n")
		cmd, err := Open(u, func(k string) string {
			if k == "BROWSER" {
				return script
			}
			return ""
		}, append(os.Environ(), "COCOONBOX_TOKEN=cb_secret"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		n := waitFile(t, out+".n")
		if tok, _ := os.ReadFile(out + ".tok"); len(tok) != 0 {
			t.Errorf("the opener got COCOONBOX_TOKEN=%s", tok)
		}
		if strings.TrimSpace(n) != "1" {
			t.Errorf("%q: the opener got %s arguments", u, strings.TrimSpace(n))
		}
		norm, _ := NormalizeURL(u)
		if got, _ := os.ReadFile(out); string(got) != norm+"\n" {
			t.Errorf("%q: the opener got %q, want %q", u, got, norm)
		}
		if _, err := os.Stat(pwned); err == nil {
			t.Fatalf("%q: a payload ran", u)
		}
	}
}

// waitFile returns the content of path once the opener, which runs
// detached, has written it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			return string(b)
		}
		if t.Context().Err() != nil {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
