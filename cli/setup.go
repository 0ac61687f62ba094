package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/offload"
	"github.com/cocoonbox/cocoonbox/setup"
)

func newSetup(env Env, s Streams) *cobra.Command {
	var remove bool
	c := &cobra.Command{
		Use:   "setup claude|codex [--remove]",
		Short: "Install /cocoonbox:offload, /cocoonbox:back and the cocoonbox MCP server into Claude Code or Codex",
		Long: `setup claude installs or updates the cocoonbox plugin of Claude Code, at
user scope, through Claude Code's own CLI (claude on PATH): a local
marketplace of one plugin, kept in cocoonbox's configuration directory, with
the slash commands /cocoonbox:offload (your agent writes the hand-over and
runs cocoonbox offload) and /cocoonbox:back (it runs cocoonbox back), and
the MCP server cocoonbox mcp (claude mcp list shows it as
plugin:cocoonbox:cocoonbox).

setup codex writes Codex's skills cocoonbox-offload and cocoonbox-back
(skills/NAME/SKILL.md in $CODEX_HOME, else ~/.codex; run them in codex as
$cocoonbox-offload and $cocoonbox-back) and appends the MCP server's table
[mcp_servers.cocoonbox] to its config.toml.

Run it again after an upgrade of cocoonbox: it updates what it installed.
Other settings stay as they are, byte for byte where the agent's own CLI
lets them. --remove takes out what setup put in: a settings file that
nothing else changed since is then byte for byte what it was before.

Exit status: 0 done; 1 failed; 2 usage; 3 refused (the agent's CLI is not on
PATH, or its configuration has a cocoonbox MCP server of someone else's).`,
		Example: `  cocoonbox setup claude
  cocoonbox setup codex
  cocoonbox setup claude --remove`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error { return runSetup(env, s, args[0], remove) },
	}
	c.Flags().BoolVar(&remove, "remove", false, "take out what setup installed")
	return c
}

func runSetup(env Env, s Streams, agent string, remove bool) error {
	dir, err := env.configDir()
	if err != nil {
		return err
	}
	dir = filepath.Join(dir, "setup", agent)
	mcp := []string{mcpCommand(), "mcp"}
	home := env.Getenv("HOME")
	switch agent {
	case "claude":
		bin, err := exec.LookPath("claude")
		if err != nil {
			return &ExitError{Code: ExitRefused, Err: errors.New("claude (Claude Code) is not on PATH: install Claude Code, or run cocoonbox setup claude where claude runs")}
		}
		cfg := env.Getenv("CLAUDE_CONFIG_DIR")
		if cfg == "" {
			cfg = filepath.Join(home, ".claude")
		}
		c := &setup.Claude{ConfigDir: cfg, Dir: dir, MCP: mcp, Commands: agentCommands("claude"),
			CLI: func(args ...string) ([]byte, error) {
				cmd := exec.Command(bin, args...)
				cmd.Env = env.Environ
				return cmd.CombinedOutput()
			}}
		if remove {
			if err := c.Remove(); err != nil {
				return err
			}
			fmt.Fprintf(s.Err, "removed the cocoonbox plugin from Claude Code (%s)\n", cfg)
			return nil
		}
		changed, err := c.Install()
		if err != nil {
			return err
		}
		if !changed {
			fmt.Fprintf(s.Err, "the cocoonbox plugin in Claude Code (%s) is up to date; nothing changed\n", cfg)
			return nil
		}
		fmt.Fprintf(s.Err, "installed the cocoonbox plugin into Claude Code (%s): /cocoonbox:offload, /cocoonbox:back and the MCP server cocoonbox; restart running claude sessions to get them\n", cfg)
	case "codex":
		h := env.Getenv("CODEX_HOME")
		if h == "" {
			h = filepath.Join(home, ".codex")
		}
		// Codex starts an MCP server with HOME, PATH and a few others
		// only: where the bridge finds the endpoint, its CA and the saved
		// token, and the offload records of its tools, comes along.
		c := &setup.Codex{Home: h, Dir: dir, MCP: mcp, Commands: codexSkills(),
			EnvVars: []string{"COCOONBOX_ENDPOINT", "COCOONBOX_CA_FILE", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"}}
		if remove {
			if err := c.Remove(); err != nil {
				return err
			}
			fmt.Fprintf(s.Err, "removed cocoonbox's skills and MCP server from Codex (%s)\n", h)
			return nil
		}
		changed, err := c.Install()
		if err != nil {
			if errors.Is(err, setup.ErrNotOurs) {
				return &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: remove it (codex mcp remove cocoonbox) and run setup again, or keep yours", err)}
			}
			return err
		}
		if !changed {
			fmt.Fprintf(s.Err, "cocoonbox's skills and MCP server in Codex (%s) are up to date; nothing changed\n", h)
			return nil
		}
		fmt.Fprintf(s.Err, "installed into Codex (%s): the skills $cocoonbox-offload and $cocoonbox-back, and the MCP server cocoonbox; restart running codex sessions to get them\n", h)
	default:
		return &UsageError{fmt.Errorf("setup: unknown agent %q: claude or codex", agent)}
	}
	return nil
}

// mcpCommand is how the agent runs this cocoonbox: by name when the
// cocoonbox on PATH is this one, else by its path.
func mcpCommand() string {
	self, err := os.Executable()
	if err != nil {
		return "cocoonbox"
	}
	if p, err := exec.LookPath("cocoonbox"); err == nil {
		a, err1 := os.Stat(p)
		b, err2 := os.Stat(self)
		if err1 == nil && err2 == nil && os.SameFile(a, b) {
			return "cocoonbox"
		}
	}
	return self
}

// codexSkills are the offload and back commands as Codex's skills: a
// skill takes no arguments, so the user's words are those of the message
// that names it.
func codexSkills() []setup.Command {
	cmds := agentCommands("codex")
	for i := range cmds {
		cmds[i].ArgumentHint = ""
		cmds[i].Body = strings.Replace(cmds[i].Body, "Their words, if any: $ARGUMENTS",
			"Their words, if any, are those of their message that named this skill ($"+setup.SkillName(cmds[i])+").", 1)
	}
	return cmds
}

// agentCommands are the offload and back commands for the agent kind.
func agentCommands(kind string) []setup.Command {
	other := []string{}
	for _, k := range offload.KindNames() {
		if k != kind {
			other = append(other, k)
		}
	}
	offloadBody := fmt.Sprintf("The user asked you to offload the task of this conversation to their cocoonbox box: a fresh %s session there continues it while they are away. Their words, if any: $ARGUMENTS\n\n"+
		"If those words name another coding-agent CLI for the box (%s), use its name as --kind below instead of %s.\n\n", kind, strings.Join(other, ", "), kind) +
		offload.HandoverPrompt("the file that `cocoonbox offload handover-path`, run in this repository, prints", kind, commandLine)
	back := commandLine(offload.Command{Verb: offload.VerbBack})
	backBody := fmt.Sprintf("The user asked you to bring home the work of this repository's offload to their cocoonbox box. Their words, if any: $ARGUMENTS\n\n"+
		"1. Run `%s` in this repository. It waits up to 10 minutes for the box agent's hand-over: give the command the longest timeout your shell tool allows.\n"+
		"2. Exit 0: it merged the box's work here; tell the user what came back as it says, read the box agent's hand-over if it names one, and go on from it when the user asks.\n"+
		"3. Exit 1: it failed and nothing changed here; show the user its message and its next steps.\n"+
		"4. Exit 3: refused, nothing changed; show the user the message and its next step.\n"+
		"5. Exit 4: it lists warnings; show them to the user and run it again with --yes only if they agree.\n", back)
	return []setup.Command{
		{Name: "offload", Description: "Offload this task to your cocoonbox box: write the hand-over, then run cocoonbox offload",
			ArgumentHint: "[" + strings.Join(offload.KindNames(), "|") + "]", Body: offloadBody},
		{Name: "back", Description: "Bring this repository's offloaded work home from your cocoonbox box (cocoonbox back)", Body: backBody},
	}
}
