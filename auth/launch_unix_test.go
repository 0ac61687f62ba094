//go:build unix

package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Launch reports an opener that fails at once with its status, and
// xdg-open's status with its meaning (xdg-open(1) EXIT CODES); one that
// exits 0 or runs on is an opened browser.
func TestLaunch(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		opener, want string
	}{
		{script("xdg-open", "exit 3"), "the browser opener xdg-open failed (exit status 3: no method available)"},
		{script("my-browser", "exit 7"), "the browser opener my-browser failed (exit status 7)"},
		{script("fine", "exit 0"), ""},
		{script("stays", "exec sleep 3"), ""},
	} {
		env := func(k string) string {
			if k == "BROWSER" {
				return tc.opener
			}
			return ""
		}
		err := Launch("https://example.com/", env, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", filepath.Base(tc.opener), err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", filepath.Base(tc.opener), err, tc.want)
		}
	}
}

func TestHasBrowser(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for _, tc := range []struct {
		goos string
		vars map[string]string
		want bool
	}{
		{"linux", nil, false},
		{"linux", map[string]string{"DISPLAY": ":0"}, true},
		{"linux", map[string]string{"WAYLAND_DISPLAY": "wayland-0"}, true},
		{"linux", map[string]string{"BROWSER": "w3m"}, true},
		{"freebsd", nil, false},
		{"darwin", nil, true},
		{"windows", nil, true},
	} {
		if got := HasBrowser(tc.goos, env(tc.vars)); got != tc.want {
			t.Errorf("HasBrowser(%s, %v) = %v", tc.goos, tc.vars, got)
		}
	}
}
