package setup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// Codex is setup's side of a Codex install: its skills
// (skills/cocoonbox-<name>/SKILL.md under Home, which the user runs as
// $cocoonbox-<name>; Codex 0.171 has no custom prompts, and answers
// /prompts:NAME "Unrecognized command") and the MCP server's table in
// config.toml, appended at its end and cut out again by Remove, the
// file's other bytes untouched.
type Codex struct {
	// Home is Codex's home: $CODEX_HOME, else ~/.codex.
	Home string
	// Dir is setup's own directory for Codex: its state in Dir/state.json.
	Dir string
	// MCP is the MCP server's command line (cocoonbox mcp).
	MCP []string
	// EnvVars are the variables of Codex's environment the MCP server
	// gets besides the few Codex passes to every server (HOME, PATH and
	// the like): its table's env_vars.
	EnvVars []string
	// Commands are the skills: a Command's Name after "cocoonbox-" is the
	// skill's name, its Description the skill's.
	Commands []Command
}

// ErrNotOurs is the error of an Install that finds an MCP server named
// cocoonbox in config.toml that setup did not write.
var ErrNotOurs = fmt.Errorf("config.toml already has an MCP server %q that cocoonbox setup did not write", Name)

func (c *Codex) configPath() string { return filepath.Join(c.Home, "config.toml") }
func (c *Codex) statePath() string  { return filepath.Join(c.Dir, "state.json") }

// SkillName is the name of cmd's skill: cocoonbox-<name>.
func SkillName(cmd Command) string { return Name + "-" + cmd.Name }

// SkillPath is where the skill of cmd goes.
func (c *Codex) SkillPath(cmd Command) string {
	return filepath.Join(c.Home, "skills", SkillName(cmd), "SKILL.md")
}

// oldPromptPath is where setup wrote cmd as a custom prompt before Codex
// dropped them: an Install or Remove takes such a file away.
func (c *Codex) oldPromptPath(cmd Command) string {
	return filepath.Join(c.Home, "prompts", Name+"-"+cmd.Name+".md")
}

// block is the MCP server's table as setup appends it.
func (c *Codex) block() string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	args := make([]string, len(c.MCP)-1)
	for i, a := range c.MCP[1:] {
		args[i] = q(a)
	}
	env := make([]string, len(c.EnvVars))
	for i, v := range c.EnvVars {
		env[i] = q(v)
	}
	b := fmt.Sprintf("# Written by cocoonbox setup codex; cocoonbox setup codex --remove removes it.\n[mcp_servers.%s]\ncommand = %s\nargs = [%s]\n",
		Name, q(c.MCP[0]), strings.Join(args, ", "))
	if len(env) > 0 {
		b += fmt.Sprintf("env_vars = [%s]\n", strings.Join(env, ", "))
	}
	return b
}

// Install writes the skills and the MCP server's table, or updates
// them. It refuses (ErrNotOurs) a config.toml that has an MCP server
// named cocoonbox of someone else's, and one that is not TOML. changed is
// false when all was there already as this setup would write it.
func (c *Codex) Install() (changed bool, err error) {
	st, err := loadState(c.statePath())
	if err != nil {
		return false, err
	}
	cur, existed, err := readFile(c.configPath())
	if err != nil {
		return false, err
	}
	changed = st == nil
	if st == nil {
		st = &state{Existed: existed, Before: cur}
	}
	base := cur
	if st.Appended != "" {
		if i := bytes.LastIndex(cur, []byte(st.Appended)); i >= 0 {
			base = append(bytes.Clone(cur[:i]), cur[i+len(st.Appended):]...)
		}
	}
	has, err := hasServer(base)
	if err != nil {
		return false, fmt.Errorf("%s: %w", c.configPath(), err)
	}
	if has {
		return false, fmt.Errorf("%s: %w", c.configPath(), ErrNotOurs)
	}
	sep := ""
	if len(base) > 0 {
		sep = "\n"
		if !bytes.HasSuffix(base, []byte("\n")) {
			sep = "\n\n"
		}
	}
	add := sep + c.block()
	next := append(bytes.Clone(base), add...)
	if ok, err := hasServer(next); err != nil || !ok {
		return false, fmt.Errorf("%s: the MCP server's table cannot be added at its end (%v): add it with codex mcp add %s -- %s", c.configPath(), err, Name, strings.Join(c.MCP, " "))
	}
	if err := st.mkdirs(c.Dir, 0o700); err != nil {
		return false, err
	}
	for _, cmd := range c.Commands {
		if err := st.mkdirs(filepath.Dir(c.SkillPath(cmd)), 0o755); err != nil {
			return false, err
		}
	}
	if !bytes.Equal(next, cur) {
		changed = true
		if err := writeLike(c.configPath(), next); err != nil {
			return false, err
		}
	}
	st.Appended = add
	for _, cmd := range c.Commands {
		c.removeOldPrompt(cmd)
		md := cmd.markdown("name: " + SkillName(cmd))
		if old, err := os.ReadFile(c.SkillPath(cmd)); err == nil && bytes.Equal(old, md) {
			continue
		}
		changed = true
		if err := atomicfile.WriteFile(c.SkillPath(cmd), md, 0o644); err != nil {
			return false, err
		}
	}
	return changed, st.save(c.statePath())
}

// hasServer reports whether TOML b defines an MCP server named cocoonbox.
func hasServer(b []byte) (bool, error) {
	var cfg struct {
		MCPServers map[string]any `toml:"mcp_servers"`
	}
	if _, err := toml.Decode(string(b), &cfg); err != nil {
		return false, err
	}
	_, ok := cfg.MCPServers[Name]
	return ok, nil
}

// Remove takes out what Install wrote: the skills, the directories it
// made, and the table it appended (the file goes when Install made it
// and nothing else is in it).
func (c *Codex) Remove() error {
	st, err := loadState(c.statePath())
	if err != nil || st == nil {
		return err
	}
	cur, _, err := readFile(c.configPath())
	if err != nil {
		return err
	}
	if i := bytes.LastIndex(cur, []byte(st.Appended)); st.Appended != "" && i >= 0 {
		next := append(bytes.Clone(cur[:i]), cur[i+len(st.Appended):]...)
		if len(next) == 0 && !st.Existed {
			err = os.Remove(c.configPath())
		} else {
			err = writeLike(c.configPath(), next)
		}
		if err != nil {
			return err
		}
	}
	for _, cmd := range c.Commands {
		if err := os.Remove(c.SkillPath(cmd)); err != nil && !os.IsNotExist(err) {
			return err
		}
		c.removeOldPrompt(cmd)
	}
	if err := os.Remove(c.statePath()); err != nil {
		return err
	}
	st.removeMadeDirs()
	return nil
}

// removeOldPrompt removes cmd's custom prompt of an older setup, and the
// prompts directory when that leaves it empty.
func (c *Codex) removeOldPrompt(cmd Command) {
	if os.Remove(c.oldPromptPath(cmd)) == nil {
		os.Remove(filepath.Dir(c.oldPromptPath(cmd)))
	}
}
