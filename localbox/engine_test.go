package localbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An engine with no socket and no program on PATH is said to be not
// installed, not to be started; with its program there, the next step
// is to start it.
func TestEngineNotInstalled(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	host := "unix://" + filepath.Join(t.TempDir(), "podman.sock")
	err := CheckEngineAnswers(EngineSettings{Engine: EnginePodman, Host: host})
	want := "engine podman is not installed: nothing at " + host + ", and no podman on PATH; install it"
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "systemctl") {
		t.Fatalf("no engine: %v\nwant %s...", err, want)
	}
	if err := os.WriteFile(filepath.Join(bin, "podman"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = CheckEngineAnswers(EngineSettings{Engine: EnginePodman, Host: host})
	if err == nil || !strings.Contains(err.Error(), "; start it (systemctl ") || !strings.Contains(err.Error(), "podman.socket") {
		t.Fatalf("podman installed, not running: %v", err)
	}
}
