//go:build linux || darwin

package boxagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// signInBox is a box user's home for sign-in by key, with a file others
// may read (victim) for links to point at.
func signInBox(t *testing.T) (c *Config, home, victim string) {
	t.Helper()
	dir := t.TempDir()
	home = filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	victim = filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("victim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c = &Config{Home: home, Shell: "/bin/sh", Environ: []string{"HOME=" + home, "PATH=/usr/bin:/bin"}}
	return c, home, victim
}

func wantUnchanged(t *testing.T, victim string) {
	t.Helper()
	b, err := os.ReadFile(victim)
	fi, _ := os.Lstat(victim)
	if err != nil || string(b) != "victim\n" || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file a link led to changed: %q, %v, %v", b, fi.Mode(), err)
	}
}

func wantMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode() != mode {
		t.Errorf("%s: %v, %v; want %v", path, fi.Mode(), err, mode)
	}
}

// TestKeyByHelperLinks: a link planted where claude's key goes is
// replaced, never written through; the key is 0600 in a 0700 directory
// (made so when it was wider), and the settings keep what they held.
func TestKeyByHelperLinks(t *testing.T) {
	c, home, victim := signInBox(t)
	keys := c.keysDir()
	if err := os.MkdirAll(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(keys, "claude")
	if err := os.Symlink(victim, file); err != nil {
		t.Fatal(err)
	}
	ks := agentwire.KindOf("claude").KeySignIn(home)
	os.MkdirAll(filepath.Dir(ks.Settings), 0o755)
	if err := os.WriteFile(ks.Settings, []byte(`{"model": "opus"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.keyByHelper(ks, file, "sk-ant-key"); err != nil {
		t.Fatal(err)
	}
	wantUnchanged(t, victim)
	if b, err := os.ReadFile(file); err != nil || string(b) != "sk-ant-key" {
		t.Errorf("key file %q, %v", b, err)
	}
	wantMode(t, file, 0o600)
	wantMode(t, keys, os.ModeDir|0o700)
	wantMode(t, ks.Settings, 0o644)
	b, _ := os.ReadFile(ks.Settings)
	if want := "{\n  \"apiKeyHelper\": \"cat " + file + "\",\n  \"model\": \"opus\"\n}\n"; string(b) != want {
		t.Errorf("settings:\n%s\nwant\n%s", b, want)
	}
}

// TestKeyByHelperRefusals: a settings file that is a link or not JSON,
// or a keys directory that is a link, is refused with nothing written.
func TestKeyByHelperRefusals(t *testing.T) {
	for _, tt := range []struct {
		name  string
		plant func(t *testing.T, c *Config, ks agentwire.KeySignIn, victim string)
		err   string
	}{
		{"settings a link", func(t *testing.T, c *Config, ks agentwire.KeySignIn, victim string) {
			os.MkdirAll(filepath.Dir(ks.Settings), 0o755)
			os.Symlink(victim, ks.Settings)
		}, "settings.json is a symbolic link"},
		{"settings not JSON", func(t *testing.T, c *Config, ks agentwire.KeySignIn, victim string) {
			os.MkdirAll(filepath.Dir(ks.Settings), 0o755)
			os.WriteFile(ks.Settings, []byte("{oops"), 0o644)
		}, "settings.json is not a JSON object"},
		{"keys a link", func(t *testing.T, c *Config, ks agentwire.KeySignIn, victim string) {
			os.MkdirAll(filepath.Dir(c.keysDir()), 0o755)
			os.Symlink(filepath.Dir(victim), c.keysDir())
		}, "keys is not a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, home, victim := signInBox(t)
			ks := agentwire.KindOf("claude").KeySignIn(home)
			tt.plant(t, c, ks, victim)
			before, _ := os.ReadFile(ks.Settings)
			err := c.keyByHelper(ks, filepath.Join(c.keysDir(), "claude"), "sk-ant-key")
			if e, ok := errors.AsType[*Error](err); !ok || e.Code != agentwire.CodeRefused || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("%v; want refused: %s", err, tt.err)
			}
			wantUnchanged(t, victim)
			if after, _ := os.ReadFile(ks.Settings); string(after) != string(before) {
				t.Errorf("settings changed: %q", after)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(victim), "claude")); err == nil {
				t.Error("the key was written through the link")
			}
			if _, err := os.Lstat(filepath.Join(c.keysDir(), "claude")); err == nil && tt.name != "keys a link" {
				t.Error("the key was kept despite the refusal")
			}
		})
	}
}

// TestKeyByCommandLink: the link where the CLI's own sign-in keeps the
// key is removed before it runs (codex writes through one), and the file
// it leaves is made 0600. The command stands for `codex login
// --with-api-key` (realcli/signin_key runs the real one); it writes with
// umask 022.
func TestKeyByCommandLink(t *testing.T) {
	c, home, victim := signInBox(t)
	file := filepath.Join(home, ".codex", "auth.json")
	os.MkdirAll(filepath.Dir(file), 0o755)
	if err := os.Symlink(victim, file); err != nil {
		t.Fatal(err)
	}
	ks := agentwire.KeySignIn{Command: `umask 022; read k; printf '{"OPENAI_API_KEY": "%s"}' "$k" > "$HOME/.codex/auth.json"`, File: file}
	if err := c.keyByCommand(ks, "sk-proj-key"); err != nil {
		t.Fatal(err)
	}
	wantUnchanged(t, victim)
	wantMode(t, file, 0o600)
	if b, _ := os.ReadFile(file); string(b) != `{"OPENAI_API_KEY": "sk-proj-key"}` {
		t.Errorf("auth.json %q", b)
	}
}

// TestSignInRefusals: what SignIn refuses before anything is written.
func TestSignInRefusals(t *testing.T) {
	c, home, _ := signInBox(t)
	for _, tt := range []struct {
		req   agentwire.SignInRequest
		stdin string
		code  string
		err   string
	}{
		{agentwire.SignInRequest{Kind: "claude"}, "sk-x\n", agentwire.CodeUsage, "give --with-api-key"},
		{agentwire.SignInRequest{Kind: "claude", WithAPIKey: true}, "", agentwire.CodeUsage, "no API key on stdin"},
		{agentwire.SignInRequest{Kind: "claude", WithAPIKey: true}, "a b\n", agentwire.CodeUsage, "holds a space"},
		{agentwire.SignInRequest{Kind: "vim", WithAPIKey: true}, "sk-x\n", agentwire.CodeUsage, "bad kind"},
		{agentwire.SignInRequest{Kind: "cursor", WithAPIKey: true}, "sk-x\n", agentwire.CodeRefused, "not built"},
		// No claude on the box's PATH here.
		{agentwire.SignInRequest{Kind: "claude", WithAPIKey: true}, "sk-x\n", agentwire.CodeRefused, "claude is not installed in the box"},
	} {
		_, err := c.SignIn(tt.req, strings.NewReader(tt.stdin))
		if e, ok := errors.AsType[*Error](err); !ok || e.Code != tt.code || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%+v %q: %v; want %s: %s", tt.req, tt.stdin, err, tt.code, tt.err)
		}
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Errorf("the home holds %v after refusals", ents)
	}
}

// The warning of a sign-in by key names where the CLI says its key comes
// from; a CLI that names no source (seen: the stand-in's claude, an
// account's sign-in) is said so, never "takes its key from ,".
func TestKeySourceWarning(t *testing.T) {
	k := agentwire.KindOf("claude")
	for _, c := range []struct{ want, got, warn string }{
		{"apiKeyHelper", "apiKeyHelper", ""},
		{"", "", ""},
		{"", "ANTHROPIC_API_KEY", ""},
		{"apiKeyHelper", "ANTHROPIC_API_KEY", "Claude Code takes its key from ANTHROPIC_API_KEY, not from this sign-in: remove that from the box's login environment (~/.profile)"},
		{"apiKeyHelper", "", "Claude Code's sign-in status names no key source, so it may not take its key from this sign-in: see claude auth status in the box"},
	} {
		if got := keySourceWarning(k, c.want, c.got); got != c.warn {
			t.Errorf("keySourceWarning(%q, %q) = %q, want %q", c.want, c.got, got, c.warn)
		}
	}
}
