package setup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tidwall/sjson"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// Claude is setup's side of a Claude Code install. The plugin goes in
// through Claude Code's own CLI (claude plugin marketplace add, claude
// plugin install), which writes Claude Code's settings.json in its own
// layout: setup then puts back the file's other bytes as they were, when
// the CLI changed nothing else in it.
type Claude struct {
	// ConfigDir is Claude Code's configuration directory:
	// $CLAUDE_CONFIG_DIR, else ~/.claude.
	ConfigDir string
	// Dir is setup's own directory for Claude Code: the marketplace in
	// Dir/marketplace, the state in Dir/state.json.
	Dir string
	// MCP is the MCP server's command line (cocoonbox mcp).
	MCP []string
	// Commands are the plugin's slash commands (/cocoonbox:<Name>).
	Commands []Command
	// CLI runs the claude CLI with args; it returns its output.
	CLI func(args ...string) ([]byte, error)
}

// PluginID is the plugin as Claude Code names it: plugin@marketplace.
const PluginID = Name + "@" + Name

// settingsKeys are the members of settings.json that setup adds to.
var settingsKeys = []string{"enabledPlugins", "extraKnownMarketplaces"}

func (c *Claude) settingsPath() string { return filepath.Join(c.ConfigDir, "settings.json") }
func (c *Claude) statePath() string    { return filepath.Join(c.Dir, "state.json") }

// Marketplace is the directory of the local marketplace setup writes.
func (c *Claude) Marketplace() string { return filepath.Join(c.Dir, "marketplace") }

// Install writes the marketplace and installs or updates its plugin, at
// user scope. It can run again: an install is updated in place, and
// changed is false when it was there already as this setup would make it.
func (c *Claude) Install() (changed bool, err error) {
	st, err := loadState(c.statePath())
	if err != nil {
		return false, err
	}
	before, existed, err := readFile(c.settingsPath())
	if err != nil {
		return false, err
	}
	changed = st == nil
	if st == nil {
		st = &state{Existed: existed, Before: before}
		if err := st.mkdirs(c.Dir, 0o700); err != nil {
			return false, err
		}
	}
	wrote, err := c.writeMarketplace()
	if err != nil {
		return false, err
	}
	changed = changed || wrote
	mkt := c.Marketplace()
	for _, args := range [][]string{
		{"plugin", "marketplace", "add", mkt},
		{"plugin", "marketplace", "update", Name},
		{"plugin", "install", "--scope", "user", PluginID},
		{"plugin", "update", "--scope", "user", PluginID},
	} {
		if out, err := c.CLI(args...); err != nil {
			return false, fmt.Errorf("claude %s: %v: %s", strings.Join(args, " "), err, lastLine(out))
		}
	}
	after, _, err := readFile(c.settingsPath())
	if err != nil {
		return false, err
	}
	if existed {
		want, err := c.withEntries(before)
		if err == nil && !bytes.Equal(want, after) && sameJSON(want, after) {
			if err := writeLike(c.settingsPath(), want); err != nil {
				return false, err
			}
			after = want
		}
	}
	changed = changed || !bytes.Equal(before, after)
	st.After = after
	return changed, st.save(c.statePath())
}

// Remove uninstalls the plugin and removes the marketplace; the settings
// file gets its bytes from before the first Install back when nothing
// but setup's entries changed in it since.
func (c *Claude) Remove() error {
	st, err := loadState(c.statePath())
	if err != nil {
		return err
	}
	cur, _, err := readFile(c.settingsPath())
	if err != nil {
		return err
	}
	for _, args := range [][]string{
		{"plugin", "uninstall", "--scope", "user", PluginID},
		{"plugin", "marketplace", "remove", Name},
	} {
		// Gone already (removed by hand) is as good as removed.
		if out, err := c.CLI(args...); err != nil && !strings.Contains(string(out), "not ") {
			return fmt.Errorf("claude %s: %v: %s", strings.Join(args, " "), err, lastLine(out))
		}
	}
	after, _, err := readFile(c.settingsPath())
	if err != nil {
		return err
	}
	switch want := withoutEntries(cur); {
	case st != nil && sameJSON(after, st.Before, settingsKeys...):
		if st.Existed {
			err = writeLike(c.settingsPath(), st.Before)
		} else {
			err = os.Remove(c.settingsPath())
		}
	case !bytes.Equal(want, after) && sameJSON(want, after, settingsKeys...):
		err = writeLike(c.settingsPath(), want)
	}
	if err != nil {
		return err
	}
	if err := os.RemoveAll(c.Marketplace()); err != nil {
		return err
	}
	if err := os.Remove(c.statePath()); err != nil && !os.IsNotExist(err) {
		return err
	}
	if st != nil {
		st.removeMadeDirs()
	}
	return nil
}

// withEntries is settings.json b with setup's entries set, its other
// bytes as they were.
func (c *Claude) withEntries(b []byte) ([]byte, error) {
	src, _ := json.Marshal(map[string]any{"source": map[string]string{"source": "directory", "path": c.Marketplace()}})
	out, err := sjson.SetRawBytes(bytes.Clone(b), "extraKnownMarketplaces."+Name, src)
	if err != nil {
		return nil, err
	}
	if out, err = sjson.SetRawBytes(out, "enabledPlugins."+strings.ReplaceAll(PluginID, "@", `\@`), []byte("true")); err != nil {
		return nil, err
	}
	return keepNewline(b, out), nil
}

// withoutEntries is settings.json b without setup's entries, its other
// bytes as they were (b itself when that fails).
func withoutEntries(b []byte) []byte {
	out, err := sjson.DeleteBytes(bytes.Clone(b), "extraKnownMarketplaces."+Name)
	if err == nil {
		out, err = sjson.DeleteBytes(out, "enabledPlugins."+strings.ReplaceAll(PluginID, "@", `\@`))
	}
	if err != nil {
		return b
	}
	return keepNewline(b, out)
}

// keepNewline is out ending in a newline when b did.
func keepNewline(b, out []byte) []byte {
	if bytes.HasSuffix(b, []byte("\n")) && !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	return out
}

// writeLike replaces the file at path with b, keeping its mode.
func writeLike(path string, b []byte) error {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	return atomicfile.WriteFile(path, b, mode)
}

// writeMarketplace writes the marketplace afresh: its manifest, the
// plugin's manifest (its version a hash of the plugin's files, so that an
// update is seen as one) and its commands. It writes nothing, and
// reports false, when the marketplace on disk is that already.
func (c *Claude) writeMarketplace() (bool, error) {
	files := map[string][]byte{}
	for _, cmd := range c.Commands {
		files[filepath.Join("commands", cmd.Name+".md")] = cmd.markdown()
	}
	h := sha256.New()
	for _, cmd := range c.Commands {
		h.Write(files[filepath.Join("commands", cmd.Name+".md")])
	}
	mcp, _ := json.Marshal(c.MCP)
	h.Write(mcp)
	author := map[string]string{"name": "cocoonbox"}
	plugin := map[string]any{
		"name":        Name,
		"version":     "1.0.0-" + hex.EncodeToString(h.Sum(nil))[:12],
		"description": "Offload this session's task to a cocoonbox box and bring it back (/cocoonbox:offload, /cocoonbox:back), and the cocoonbox MCP server: your boxes' lifecycle and offloads as tools.",
		"author":      author,
		"mcpServers":  map[string]any{Name: map[string]any{"command": c.MCP[0], "args": c.MCP[1:]}},
	}
	market := map[string]any{
		"name":        Name,
		"owner":       author,
		"description": "The cocoonbox plugin, written by cocoonbox setup claude on this computer.",
		"plugins":     []map[string]any{{"name": Name, "source": "./plugins/" + Name, "description": plugin["description"]}},
	}
	for name, v := range map[string]any{
		filepath.Join("..", "..", ".claude-plugin", "marketplace.json"): market,
		filepath.Join(".claude-plugin", "plugin.json"):                  plugin,
	} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return false, err
		}
		files[name] = append(b, '\n')
	}
	root := c.Marketplace()
	pdir := filepath.Join(root, "plugins", Name)
	if sameTree(root, pdir, files) {
		return false, nil
	}
	if err := os.RemoveAll(root); err != nil {
		return false, err
	}
	for name, b := range files {
		p := filepath.Join(pdir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return false, err
		}
		if err := atomicfile.WriteFile(p, b, 0o644); err != nil {
			return false, err
		}
	}
	return true, nil
}

// sameTree reports whether the regular files under root are exactly
// files, named relative to dir (which is under root).
func sameTree(root, dir string, files map[string][]byte) bool {
	n := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if want, ok := files[rel]; err != nil || !ok || !bytes.Equal(b, want) {
			return errors.New("differs")
		}
		n++
		return nil
	})
	return err == nil && n == len(files)
}

// lastLine is the last non-empty line of a CLI's output.
func lastLine(out []byte) string {
	ls := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(ls[len(ls)-1])
}
