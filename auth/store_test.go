package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tok = "cb_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestFileStoreRoundTrip(t *testing.T) {
	s := FileStore{Dir: filepath.Join(t.TempDir(), "cocoonbox")}
	if _, err := s.Get("unix:///a"); !errors.Is(err, ErrNoToken) {
		t.Fatalf("Get on an empty store: %v, want ErrNoToken", err)
	}
	if err := s.Put("unix:///a", Credential{Token: tok, Source: SourcePaste}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Get("unix:///a")
	if err != nil || c.Token != tok || c.Source != SourcePaste {
		t.Fatalf("Get = %+v, %v", c, err)
	}
	if _, err := s.Get("unix:///b"); !errors.Is(err, ErrNoToken) {
		t.Fatalf("Get for another endpoint: %v, want ErrNoToken", err)
	}
	for p, want := range map[string]os.FileMode{s.Dir: 0o700, filepath.Join(s.Dir, "credentials.json"): 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %o, want %o", p, fi.Mode().Perm(), want)
		}
	}
	if err := s.Delete("unix:///a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("unix:///a"); !errors.Is(err, ErrNoToken) {
		t.Fatalf("Get after Delete: %v, want ErrNoToken", err)
	}
}

func TestFileStoreRefusesWideModes(t *testing.T) {
	s := FileStore{Dir: filepath.Join(t.TempDir(), "cocoonbox")}
	if err := s.Put("unix:///a", Credential{Token: tok}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(s.Dir, "credentials.json")
	for _, tc := range []struct {
		path string
		mode os.FileMode
		fix  string
	}{
		{file, 0o644, "chmod 0600 " + file},
		{s.Dir, 0o755, "chmod 0700 " + s.Dir},
	} {
		if err := os.Chmod(tc.path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get("unix:///a")
		var me *ModeError
		if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.fix) {
			t.Errorf("mode %o on %s: Get error %v, want a ModeError naming %q", tc.mode, tc.path, err, tc.fix)
		}
		if err := s.Put("unix:///b", Credential{Token: tok}); err == nil {
			t.Errorf("mode %o on %s: Put succeeded", tc.mode, tc.path)
		}
		os.Chmod(tc.path, map[string]os.FileMode{file: 0o600, s.Dir: 0o700}[tc.path])
	}
}

func TestPutRefusesMalformedToken(t *testing.T) {
	s := FileStore{Dir: t.TempDir()}
	for _, bad := range []string{"", "cb_123", "hunter2", strings.ToUpper(tok), tok + "0"} {
		if err := s.Put("unix:///a", Credential{Token: bad}); err == nil {
			t.Errorf("Put(%q) succeeded", bad)
		} else if strings.Contains(err.Error(), bad) && bad != "" {
			t.Errorf("Put(%q) error repeats the token: %v", bad, err)
		}
	}
}
