package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/cli"
)

// windowsEnv is a Windows laptop as the cli sees it (Env.GOOS), with an
// empty HOME to show that a refusal writes nothing.
func windowsEnv(t *testing.T) (cli.Env, string) {
	home := t.TempDir()
	vars := map[string]string{"HOME": home}
	return cli.Env{GOOS: "windows", Getenv: func(k string) string { return vars[k] }, Environ: []string{"HOME=" + home}}, home
}

// On Windows, offload, back and localbox (every verb) refuse in one line
// with exit 3, before they read or write anything; the commands that run
// there are not refused.
func TestWindowsRefusals(t *testing.T) {
	for _, args := range [][]string{
		{"offload", "--kind", "claude"},
		{"offload", "status"},
		{"offload", "secrets", "add", "aws"},
		{"back"},
		{"localbox", "start"},
		{"localbox", "serve", "--listen", "127.0.0.1:0"},
		{"localbox", "status"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			env, home := windowsEnv(t)
			var out, errb bytes.Buffer
			code := cli.Cocoonbox(args, env, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			if code != cli.ExitRefused {
				t.Errorf("exit %d, want %d", code, cli.ExitRefused)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
			want := "cocoonbox: " + args[0] + " does not run on Windows: "
			if lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "; run it on macOS, Linux or in WSL") {
				t.Errorf("stderr %q, want one line %q…", errb.String(), want)
			}
			if ents, _ := os.ReadDir(home); len(ents) != 0 {
				t.Errorf("the refusal wrote %v under HOME", ents)
			}
		})
	}
	// Help is still there to read.
	env, _ := windowsEnv(t)
	var out, errb bytes.Buffer
	if code := cli.Cocoonbox([]string{"offload", "--help"}, env, cli.Streams{Out: &out, Err: &errb}); code != 0 || !strings.Contains(out.String(), "offload moves") {
		t.Errorf("offload --help on Windows: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// The commands meant for Windows get past the platform check there: each
// fails for its own reason (no endpoint), not for the platform.
func TestWindowsRunsTheRest(t *testing.T) {
	for _, args := range [][]string{
		{"boxes"},
		{"devices"},
		{"logout"},
		// Not rsh: in process, it would ignore SIGPIPE for the whole test
		// binary, and the in-process boxes' commands would inherit that.
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			env, _ := windowsEnv(t)
			var out, errb bytes.Buffer
			code := cli.Cocoonbox(args, env, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			if code == cli.ExitRefused || strings.Contains(errb.String(), "Windows") {
				t.Errorf("exit %d, stderr %q: refused on Windows", code, errb.String())
			}
		})
	}
}

// cocoonbox-agent refuses on Windows in its own shape: one JSON line on
// stdout with code refused, one line on stderr, exit 3.
func TestAgentWindowsRefusal(t *testing.T) {
	env, home := windowsEnv(t)
	var out, errb bytes.Buffer
	code := cli.Agent([]string{"offload", "status"}, env, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 3 {
		t.Errorf("exit %d, want 3", code)
	}
	var res struct {
		OK   bool   `json:"ok"`
		Code string `json:"code"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.OK || res.Code != "refused" || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("stdout %q, want one JSON line with code refused", out.String())
	}
	if errb.String() != "cocoonbox-agent: the box half of offload runs in Linux boxes, not on Windows\n" {
		t.Errorf("stderr %q, want one line", errb.String())
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Errorf("the refusal wrote %v under HOME", ents)
	}
}

// The contract's Mac paths: on macOS (Env.GOOS darwin) offload keeps its
// files under ~/Library/Application Support/CocoonBox/offload/<repo key>/
// (0700, the hand-over 0600) and repos.json (0600) beside them, whatever
// XDG_DATA_HOME says; on Linux under $XDG_DATA_HOME/cocoonbox/offload/.
func TestOffloadDataDirByPlatform(t *testing.T) {
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	t.Chdir(repo)
	for goos, base := range map[string]string{
		"darwin": filepath.Join("HOME", "Library", "Application Support", "CocoonBox", "offload"),
		"linux":  filepath.Join("XDG", "cocoonbox", "offload"),
	} {
		t.Run(goos, func(t *testing.T) {
			root := t.TempDir()
			vars := map[string]string{"HOME": filepath.Join(root, "HOME"), "XDG_DATA_HOME": filepath.Join(root, "XDG"),
				"GIT_CONFIG_GLOBAL": os.DevNull, "GIT_CONFIG_NOSYSTEM": "1"}
			var environ []string
			for k, v := range vars {
				environ = append(environ, k+"="+v)
			}
			env := cli.Env{GOOS: goos, Getenv: func(k string) string { return vars[k] }, Environ: environ}
			var out, errb bytes.Buffer
			if code := cli.Cocoonbox([]string{"offload", "handover-path"}, env, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb}); code != 0 {
				t.Fatalf("offload handover-path: exit %d, stderr %q", code, errb.String())
			}
			p := strings.TrimSuffix(out.String(), "\n")
			offloadDir := filepath.Join(root, base)
			errb.Reset()
			if code := cli.Cocoonbox([]string{"offload", "secrets", "add", "aws"}, env, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb}); code != 0 {
				t.Fatalf("offload secrets add aws: exit %d, stderr %q", code, errb.String())
			}
			rel, err := filepath.Rel(offloadDir, p)
			if err != nil || strings.HasPrefix(rel, "..") || strings.Count(rel, string(filepath.Separator)) != 1 || filepath.Base(p) != "handover.md" {
				t.Fatalf("hand-over at %s, want %s/<repo key>/handover.md", p, offloadDir)
			}
			for path, want := range map[string]os.FileMode{offloadDir: 0o700, filepath.Dir(p): 0o700, p: 0o600, filepath.Join(offloadDir, "repos.json"): 0o600} {
				if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
					t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode().Perm(), err, want)
				}
			}
			other := map[string]string{"darwin": "XDG", "linux": "HOME"}[goos]
			if _, err := os.Stat(filepath.Join(root, other)); err == nil {
				t.Errorf("%s: offload wrote under %s too", goos, other)
			}
		})
	}
}
