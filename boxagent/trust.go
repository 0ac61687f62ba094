package boxagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// presetTrust marks dir as trusted for the kind's CLI, so that no trust
// dialog holds the first prompt, and changes nothing else of its config:
// claude's ~/.claude.json gets hasCompletedOnboarding and
// projects[dir].hasTrustDialogAccepted; codex's ~/.codex/config.toml gets
// [projects."dir"] trust_level = "trusted". When the box's login
// environment sets ANTHROPIC_API_KEY, claude's first-run "Detected a
// custom API key" dialog would hold the first prompt too: the key's last
// 20 characters go into customApiKeyResponses.approved, as answering Yes
// records them (the user set the key for the box's CLI).
func (c *Config) presetTrust(kind, dir string) error {
	switch kind {
	case KindClaude:
		return presetClaude(filepath.Join(c.Home, ".claude.json"), dir, c.apiKeyTail())
	case KindCodex:
		return presetCodex(filepath.Join(c.Home, ".codex", "config.toml"), dir)
	}
	return nil
}

// apiKeyTail is the last 20 characters of ANTHROPIC_API_KEY in the box's
// login environment, as claude keeps an approved key, or "".
func (c *Config) apiKeyTail() string {
	out, err := c.loginShell(probeTimeout, "", `printf '%s' "${ANTHROPIC_API_KEY-}"`)
	k := strings.TrimSpace(out)
	if err != nil || k == "" || strings.ContainsAny(k, " \n") {
		return ""
	}
	if len(k) > 20 {
		k = k[len(k)-20:]
	}
	return k
}

func presetClaude(path, dir, keyTail string) error {
	doc := map[string]any{}
	mode := os.FileMode(0o600)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(bytes.TrimSpace(b)) > 0 {
			if err := json.Unmarshal(b, &doc); err != nil {
				return fmt.Errorf("%s is not a JSON object (%v); fix or remove it", path, err)
			}
		}
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	doc["hasCompletedOnboarding"] = true
	projects, _ := doc["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
	}
	p, _ := projects[dir].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	p["hasTrustDialogAccepted"] = true
	projects[dir] = p
	doc["projects"] = projects
	if keyTail != "" {
		r, _ := doc["customApiKeyResponses"].(map[string]any)
		if r == nil {
			r = map[string]any{}
		}
		approved, _ := r["approved"].([]any)
		rejected, _ := r["rejected"].([]any)
		if !slices.Contains(approved, any(keyTail)) {
			approved = append(approved, keyTail)
		}
		// A key rejected before is the user's choice: left rejected.
		if rejected == nil {
			rejected = []any{}
		}
		r["approved"], r["rejected"] = approved, rejected
		doc["customApiKeyResponses"] = r
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(out, '\n'), mode)
}

// presetCodex sets trust_level in the project's table of config.toml,
// adding the table when it is not there; other lines stay as they are.
func presetCodex(path, dir string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	header := `[projects."` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(dir) + `"]`
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(b) == 0 {
		lines = nil
	}
	in, done := false, false
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			if in && !done {
				out = append(out, `trust_level = "trusted"`)
				done = true
			}
			in = t == header
		}
		if in && strings.HasPrefix(t, "trust_level") && strings.Contains(strings.SplitN(t, "=", 2)[0], "trust_level") {
			if !done {
				out = append(out, `trust_level = "trusted"`)
				done = true
			}
			continue
		}
		out = append(out, l)
	}
	if in && !done {
		out = append(out, `trust_level = "trusted"`)
		done = true
	}
	if !done {
		if len(out) > 0 {
			out = append(out, "")
		}
		out = append(out, header, `trust_level = "trusted"`)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o600)
}
