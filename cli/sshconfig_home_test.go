package cli

import (
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// OpenSSH reads the passwd entry's home, not $HOME: ssh-config warns
// exactly when the two differ, naming both files and the fixes.
func TestPasswdHomeWarning(t *testing.T) {
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		t.Fatalf("user.Current: %v (home %q)", err, u.HomeDir)
	}
	real := filepath.Join(u.HomeDir, ".ssh", "config")
	if w := passwdHomeWarning(u.HomeDir+string(filepath.Separator), real); w != "" {
		t.Errorf("same home: got %q, want no warning", w)
	}
	other := t.TempDir()
	path := filepath.Join(other, ".ssh", "config")
	w := passwdHomeWarning(other, path)
	for _, want := range []string{"warning", real, path, "ssh -F " + path, "--file " + real} {
		if !strings.Contains(w, want) {
			t.Errorf("%q lacks %q", w, want)
		}
	}
	if strings.Contains(w, "\n") {
		t.Errorf("%q is more than one line", w)
	}
}
