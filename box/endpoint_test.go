package box

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in      string
		want    Endpoint
		wantErr string
	}{
		{in: "https://api.example.com", want: Endpoint{URL: "https://api.example.com", Target: "api.example.com:443", TLS: true}},
		{in: "https://api.example.com:443/", want: Endpoint{URL: "https://api.example.com", Target: "api.example.com:443", TLS: true}},
		{in: "https://api.example.com:8443", want: Endpoint{URL: "https://api.example.com:8443", Target: "api.example.com:8443", TLS: true}},
		{in: "http://127.0.0.1:7000", want: Endpoint{URL: "http://127.0.0.1:7000", Target: "127.0.0.1:7000"}},
		{in: "http://127.9.9.9:7000", want: Endpoint{URL: "http://127.9.9.9:7000", Target: "127.9.9.9:7000"}},
		{in: "http://[::1]:7000", want: Endpoint{URL: "http://[::1]:7000", Target: "[::1]:7000"}},
		{in: "http://localhost:7000", want: Endpoint{URL: "http://localhost:7000", Target: "localhost:7000"}},
		{in: "unix:///run/x/../box.sock", want: Endpoint{URL: "unix:///run/box.sock", Target: "unix:///run/box.sock"}},
		{in: "http://10.0.0.1:7000", wantErr: "refused: plaintext"},
		{in: "http://example.com:7000", wantErr: "refused: plaintext"},
		{in: "http://0.0.0.0:7000", wantErr: "refused: plaintext"},
		{in: "http://127.0.0.1", wantErr: "needs a port"},
		{in: "https://user:pw@example.com", wantErr: "no path, query or user"},
		{in: "https://example.com/api", wantErr: "no path, query or user"},
		{in: "unix://relative/sock", wantErr: "unix:///ABSOLUTE/PATH"},
		{in: "example.com:443", wantErr: "unknown scheme"},
		{in: "api.example.com", wantErr: "no scheme"},
		{in: "ftp://example.com", wantErr: "unknown scheme"},
	}
	for _, tt := range tests {
		got, err := ParseEndpoint(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseEndpoint(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseEndpoint(%q) error has more than one line: %q", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseEndpoint(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseEndpoint(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestResolveEndpoint(t *testing.T) {
	home := t.TempDir()
	if err := SaveConfig(filepath.Join(home, ".config", "cocoonbox"), Config{Endpoint: "unix:///saved.sock"}); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name string
		flag string
		env  map[string]string
		want string
	}{
		{"flag wins", "unix:///flag.sock", map[string]string{"HOME": home, "COCOONBOX_ENDPOINT": "unix:///env.sock"}, "unix:///flag.sock"},
		{"env over config", "", map[string]string{"HOME": home, "COCOONBOX_ENDPOINT": "unix:///env.sock"}, "unix:///env.sock"},
		{"config", "", map[string]string{"HOME": home}, "unix:///saved.sock"},
		{"service default", "", map[string]string{"HOME": t.TempDir()}, DefaultEndpoint},
		{"xdg config home", "", map[string]string{"HOME": t.TempDir(), "XDG_CONFIG_HOME": filepath.Join(home, ".config")}, "unix:///saved.sock"},
	}
	for _, tt := range tests {
		got, err := ResolveEndpoint(tt.flag, env(tt.env))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got.URL != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got.URL, tt.want)
		}
	}
}

func TestSaveConfigModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cocoonbox")
	if err := SaveConfig(dir, Config{Endpoint: "unix:///x"}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "config.json"): 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %o, want %o", p, fi.Mode().Perm(), want)
		}
	}
}
