package boxagent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// tmux runs tmux with the config's environment (TMUX_TMPDIR chooses the
// server, as for every tmux the box user runs).
func (c *Config) tmux(stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", args...)
	cmd.Env = c.Environ
	cmd.Dir = c.Home
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("tmux %s: %s", args[0], msg)
	}
	return out.String(), nil
}

// target is a tmux target for the session's active pane, matched exactly.
func target(session string) string { return "=" + session + ":" }

func (c *Config) tmuxAlive(session string) bool {
	_, err := c.tmux(nil, "has-session", "-t", "="+session)
	return err == nil
}

// tmuxStart starts session: a login shell in dir with env, then types
// line into it (contract: started with send-keys).
func (c *Config) tmuxStart(session, dir string, env []string, line string) error {
	// A live session gets its pane respawned rather than the session
	// killed and made again: killing a server's last session makes it exit,
	// and a new-session that races the exit fails.
	args := []string{"new-session", "-d", "-s", session, "-c", dir, "-x", "200", "-y", "50"}
	if c.tmuxAlive(session) {
		args = []string{"respawn-pane", "-k", "-t", target(session), "-c", dir}
	}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	if _, err := c.tmux(nil, args...); err != nil {
		return err
	}
	if _, err := c.tmux(nil, "send-keys", "-t", target(session), "-l", "--", line); err != nil {
		return err
	}
	_, err := c.tmux(nil, "send-keys", "-t", target(session), "Enter")
	return err
}

// tmuxPaste pastes body into the session as one bracketed paste and
// presses Enter; escFirst sends Esc before it.
//
// Claude Code takes an Enter that reaches it in the same read as the end
// of a paste as part of the paste, and the text then sits at its prompt
// unsent (seen with 2.1.197): the Enter goes on its own. By default it
// goes pasteSettle after the paste. With watch it goes once the pane
// shows the paste taken: both real CLIs show a paste at their prompt
// within about 10 ms (claude 2.1.197, codex 0.171.0); a pane that has not
// changed after pasteSettle (a CLI that is busy, or that shows nothing)
// gets the Enter then.
func (c *Config) tmuxPaste(session, body string, escFirst, watch bool) error {
	if escFirst {
		if _, err := c.tmux(nil, "send-keys", "-t", target(session), "Escape"); err != nil {
			return err
		}
	}
	buf := "cb-" + session
	// One tmux loads the buffer and captures the pane as it is before the
	// paste.
	before, err := c.tmux([]byte(body), "load-buffer", "-b", buf, "-", ";", "capture-pane", "-p", "-t", target(session))
	if err != nil {
		return err
	}
	if _, err := c.tmux(nil, "paste-buffer", "-p", "-d", "-b", buf, "-t", target(session)); err != nil {
		return err
	}
	if watch {
		c.waitPaneChange(session, before, time.Now().Add(pasteSettle))
	} else {
		time.Sleep(pasteSettle)
	}
	_, err = c.tmux(nil, "send-keys", "-t", target(session), "Enter")
	return err
}

// pasteSettle is the pause between a paste and its Enter, and the
// longest wait for the pane to show the paste.
const pasteSettle = 300 * time.Millisecond

// pastePoll is how often the pane is looked at after a paste.
const pastePoll = 5 * time.Millisecond

// waitPaneChange waits until the session's pane differs from before, or
// until deadline, and reports whether it did.
func (c *Config) waitPaneChange(session, before string, deadline time.Time) bool {
	for {
		time.Sleep(pastePoll)
		if !time.Now().Before(deadline) {
			return false
		}
		pane, err := c.tmux(nil, "capture-pane", "-p", "-t", target(session))
		if err != nil {
			return false
		}
		if pane != before {
			return true
		}
	}
}

// tmuxType types text and Enter, as a user would at the prompt.
func (c *Config) tmuxType(session, text string) error {
	if _, err := c.tmux(nil, "send-keys", "-t", target(session), "-l", "--", text); err != nil {
		return err
	}
	_, err := c.tmux(nil, "send-keys", "-t", target(session), "Enter")
	return err
}

// tmuxLastLines are the last n lines of the session's pane that are not
// blank, or nil when it is gone.
func (c *Config) tmuxLastLines(session string, n int) []string {
	out, err := c.tmux(nil, "capture-pane", "-p", "-J", "-S", "-200", "-t", target(session))
	if err != nil {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimRight(l, " \t"); strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines[max(0, len(lines)-n):]
}

// tmuxScreen is what the session's pane shows now, a line each (no
// scrollback: a dialog or a wait that is over may still be there).
func (c *Config) tmuxScreen(session string) []string {
	out, err := c.tmux(nil, "capture-pane", "-p", "-J", "-t", target(session))
	if err != nil {
		return nil
	}
	return strings.Split(out, "\n")
}

// tmuxWindowActivity is the session's last window activity, in ms since
// the epoch, or 0.
func (c *Config) tmuxWindowActivity(session string) int64 {
	out, err := c.tmux(nil, "display-message", "-p", "-t", target(session), "#{window_activity}")
	if err != nil {
		return 0
	}
	s, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	return s * 1000
}

// tmuxPanePid is the pid of the session's pane's process, its login
// shell, or 0 when the session is gone.
func (c *Config) tmuxPanePid(session string) int {
	out, err := c.tmux(nil, "display-message", "-p", "-t", target(session), "#{pane_pid}")
	if err != nil {
		return 0
	}
	shell, _ := strconv.Atoi(strings.TrimSpace(out))
	return shell
}

// tmuxForeground is the pid of the job that has the terminal of the
// session's pane: a live child of the pane's login shell that leads the
// terminal's foreground process group. It is 0 when the shell itself has
// the terminal (nothing runs, or a command substitution of the line it is
// about to run), or the pane is gone. The shell is interactive, so it
// runs each job in a process group of its own (job control).
func (c *Config) tmuxForeground(session string) int {
	return foreground(c.tmuxPanePid(session))
}

// foreground is tmuxForeground for the pane whose shell is shell.
func foreground(shell int) int {
	if shell <= 0 {
		return 0
	}
	sh, ok := readProcStat(shell)
	if !ok || sh.tpgid <= 0 || sh.tpgid == sh.pgrp {
		return 0
	}
	lead, ok := readProcStat(sh.tpgid)
	if !ok || lead.state == 'Z' || lead.ppid != shell {
		return 0
	}
	return sh.tpgid
}

// inHook reports whether one of our hook commands (cocoonbox-agent
// offload event) runs under the process cli: the CLI is in a hook of its
// own, so still in its turn, though the hook's news may say it is at its
// prompt (a Stop hook waits for the inbox's answer).
func inHook(cli int) bool { return len(hookProcs(cli)) > 0 }

// hookProcs are the processes under cli that run one of our hook
// commands: cocoonbox-agent offload event itself, or the shell the CLI
// runs it with.
func hookProcs(cli int) []int {
	if cli <= 0 {
		return nil
	}
	var out []int
	kids := procChildren()
	for todo := append([]int(nil), kids[cli]...); len(todo) > 0; todo = todo[1:] {
		p := todo[0]
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
		if bytes.Contains(b, []byte("offload\x00event\x00")) || bytes.Contains(b, []byte("offload event ")) {
			out = append(out, p)
		}
		todo = append(todo, kids[p]...)
	}
	return out
}

// alive are those of pids that still run as children of parent (not
// exited, not reaped: a zombie has exited).
func alive(pids []int, parent int) []int {
	var out []int
	for _, p := range pids {
		if st, ok := readProcStat(p); ok && st.state != 'Z' && st.ppid == parent {
			out = append(out, p)
		}
	}
	return out
}

// procStat holds the fields of /proc/PID/stat (proc(5)) used here.
type procStat struct {
	state byte
	ppid  int
	pgrp  int
	tpgid int // the foreground process group of the process's terminal
}

func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// The command name in parentheses may hold spaces; the fields after
	// the last ')' are state, ppid, pgrp, session, tty_nr, tpgid, ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 6 || len(f[0]) != 1 {
		return procStat{}, false
	}
	st := procStat{state: f[0][0]}
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgrp, _ = strconv.Atoi(f[2])
	st.tpgid, _ = strconv.Atoi(f[5])
	return st, true
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int { return procChildren()[pid] }

// procChildren maps each pid of /proc to its children's.
func procChildren() map[int][]int {
	kids := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(p); ok {
			kids[st.ppid] = append(kids[st.ppid], p)
		}
	}
	return kids
}

// endCLI ends the session's CLI: the kind's exit command, then SIGTERM
// after grace, then the tmux session itself. It waits for what ran under
// the pane's shell when it typed the command (the CLI, and what the CLI
// started), not for the line the shell runs after the CLI (the exit
// event), which the session's end cuts short; the record says stopped
// after end either way.
func (c *Config) endCLI(session, kind string, grace time.Duration) {
	shell := c.tmuxPanePid(session)
	if shell == 0 {
		if c.tmuxAlive(session) {
			c.tmux(nil, "kill-session", "-t", "="+session)
		}
		return
	}
	pids := children(shell)
	// The exit command is typed only to a program that holds the terminal,
	// never to the login shell.
	if foreground(shell) != 0 {
		c.tmuxType(session, agentwire.KindOf(kind).ExitCommand())
		// A CLI exits within a few hundred ms, which back waits for (beside
		// its merge): look often; a look reads a few /proc files.
		deadline := time.Now().Add(grace)
		for time.Now().Before(deadline) && len(alive(pids, shell)) > 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if left := alive(pids, shell); len(left) > 0 {
		c.logf("the %s session did not exit within %v: SIGTERM", kind, grace)
		for _, p := range left {
			proc.Signal(p, syscall.SIGTERM)
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && len(alive(left, shell)) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	c.tmux(nil, "kill-session", "-t", "="+session)
}

// procExists reports whether process pid exists, a zombie included.
func procExists(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return err == nil
}
