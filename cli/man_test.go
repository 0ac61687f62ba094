package cli

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cocoonbox/cocoonbox/agentcmd"
	"github.com/cocoonbox/cocoonbox/boxsession"
)

// The man pages are made from the commands themselves (make man, at
// install), so they cannot fall behind: this checks that there is one for
// every command of the five binaries, that each names the flags its
// command takes, and that the hand-rendered ones carry the usage their
// --help prints.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if err := manPages(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	want := []string{"cocoonbox-ssh.1", "git-remote-cocoonbox.1", "cocoonbox-session.1"}
	none := Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	env := Env{Getenv: func(string) string { return "" }}
	root := newRoot(env, none)
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c.HasParent() {
			return
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
		if name == "cocoonbox-ssh.1" {
			// `cocoonbox ssh` is the binary's page.
			return
		}
		want = append(want, name)
		page, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("no page for %s", c.CommandPath())
			return
		}
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if p := string(page); !strings.Contains(p, "--"+f.Name) && !strings.Contains(p, `\-\-`+strings.ReplaceAll(f.Name, "-", `\-`)) {
				t.Errorf("%s: the page does not name --%s", name, f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	walk(agentcmd.Root(agentcmdEnv(env), agentcmd.Streams(none)))
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("pages\n %v\nwant\n %v", got, want)
	}
	ssh, _ := os.ReadFile(filepath.Join(dir, "cocoonbox-ssh.1"))
	for _, l := range sshPage("cocoonbox-ssh").Synopsis {
		if !strings.Contains(string(ssh), strings.ReplaceAll(l, "-", `\-`)+"\n") {
			t.Errorf("cocoonbox-ssh.1 lacks the usage line %q", l)
		}
	}
	session, _ := os.ReadFile(filepath.Join(dir, "cocoonbox-session.1"))
	for _, l := range boxsession.HelpPage("cocoonbox-session").Synopsis {
		if !strings.Contains(string(session), strings.ReplaceAll(l, "-", `\-`)+"\n") {
			t.Errorf("cocoonbox-session.1 lacks the usage line %q", l)
		}
	}
	if strings.Contains(string(ssh), "docs/") {
		t.Error("cocoonbox-ssh.1 points at docs/, which is not installed")
	}
}

// pflag takes a back-quoted word of a flag's usage as the name of its
// value: "--engine localbox image build" in --help and the man page. No
// flag's usage may hold one.
func TestFlagUsageNoBackquote(t *testing.T) {
	none := Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	env := Env{Getenv: func(string) string { return "" }}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				name, _ := pflag.UnquoteUsage(f)
				t.Errorf("%s --%s: its usage holds a back quote, shown as --%s %s", c.CommandPath(), f.Name, f.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(env, none))
	walk(agentcmd.Root(agentcmdEnv(env), agentcmd.Streams(none)))
}
