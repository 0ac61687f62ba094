// Package setup installs cocoonbox into a coding agent on this computer,
// and takes it out again: for Claude Code a plugin (a local marketplace
// of one plugin: the /cocoonbox:offload and /cocoonbox:back commands and
// the cocoonbox MCP server), for Codex custom prompts and an MCP server
// entry. It edits the agent's settings as little as it can: a remove
// leaves each settings file byte for byte as it was before the setup
// when nothing else changed it since.
package setup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// Name is the name of what setup adds everywhere: the MCP server, the
// marketplace and its plugin.
const Name = "cocoonbox"

// Command is one slash command (Claude Code) or custom prompt (Codex):
// its file's name without .md, a one-line description, the hint of its
// arguments, and its body, markdown the agent's model reads.
type Command struct {
	Name, Description, ArgumentHint, Body string
}

// markdown is c as a command file: YAML front matter, then the body.
// extra are more front-matter lines.
func (c Command) markdown(extra ...string) []byte {
	b := fmt.Appendf(nil, "---\ndescription: %s\n", yamlString(c.Description))
	if c.ArgumentHint != "" {
		b = fmt.Appendf(b, "argument-hint: %s\n", yamlString(c.ArgumentHint))
	}
	for _, l := range extra {
		b = append(b, l...)
		b = append(b, '\n')
	}
	b = append(b, "---\n\n"...)
	return append(b, c.Body...)
}

// yamlString is s as a YAML flow scalar: a JSON string is one.
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// state is what a setup did that its remove undoes, kept in the state
// file of its agent: the settings file's bytes before the setup, and
// which of the things setup makes were there before it.
type state struct {
	// Existed is whether the settings file existed; Before its bytes then.
	Existed bool   `json:"existed"`
	Before  []byte `json:"before,omitempty"`
	// After is the settings file as setup left it: a remove puts Before
	// back only when the file is still After but for setup's entries.
	After []byte `json:"after,omitempty"`
	// Appended is what setup appended to a file (Codex's config.toml).
	Appended string `json:"appended,omitempty"`
	// MadeDirs are the directories setup made, deepest last.
	MadeDirs []string `json:"made_dirs,omitempty"`
}

func loadState(path string) (*state, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

func (s *state) save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

// mkdirs makes dir and its missing parents, noting each one it made in
// s.MadeDirs.
func (s *state) mkdirs(dir string, perm os.FileMode) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		s.MadeDirs = append(s.MadeDirs, missing[i])
	}
	return nil
}

// removeMadeDirs removes the directories s made, deepest first, each only
// when empty.
func (s *state) removeMadeDirs() {
	for i := len(s.MadeDirs) - 1; i >= 0; i-- {
		os.Remove(s.MadeDirs[i])
	}
}

// readFile is the file at path, and whether it exists.
func readFile(path string) ([]byte, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// sameJSON reports whether a and b hold the same JSON value, an object
// member in keys that is an empty object counting as absent.
func sameJSON(a, b []byte, keys ...string) bool {
	var va, vb any
	if len(a) == 0 {
		a = []byte("{}")
	}
	if len(b) == 0 {
		b = []byte("{}")
	}
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	for _, v := range []any{va, vb} {
		if m, ok := v.(map[string]any); ok {
			for _, k := range keys {
				if o, ok := m[k].(map[string]any); ok && len(o) == 0 {
					delete(m, k)
				}
			}
		}
	}
	return reflect.DeepEqual(va, vb)
}
