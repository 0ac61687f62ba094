package boxagent

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/jsonfile"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// MaxEnvWait is the longest the env verb waits for the environment step.
const MaxEnvWait = 900 * time.Second

// stepTimeout bounds one install or fetch.
const stepTimeout = 10 * time.Minute

func (c *Config) envReportPath(k string) string {
	return filepath.Join(c.repoDir(k), "env-report.json")
}

// readEnvFile returns k's env.json; no file is an error too.
func (c *Config) readEnvFile(k string) (*agentwire.Environment, error) {
	var e agentwire.Environment
	if ok, err := jsonfile.Read(filepath.Join(c.repoDir(k), "env.json"), &e); !ok {
		return nil, cmp.Or(err, fs.ErrNotExist)
	}
	return &e, nil
}

// readEnvReport returns k's report, nil when no step ran.
func (c *Config) readEnvReport(k string) (*agentwire.EnvReport, error) {
	var r agentwire.EnvReport
	if ok, err := jsonfile.Read(c.envReportPath(k), &r); !ok {
		return nil, err
	}
	return &r, nil
}

func (c *Config) writeEnvReport(k string, r *agentwire.EnvReport) error {
	return jsonfile.Write(c.envReportPath(k), r, 0o600)
}

// loginShell runs script with the user's login shell in dir (Home when
// empty), as a terminal in the box would, and returns its stdout.
func (c *Config) loginShell(timeout time.Duration, dir, script string, extraEnv ...string) (string, error) {
	return c.loginShellIn(nil, timeout, dir, script, extraEnv...)
}

// loginShellIn is loginShell with stdin (nil for none).
func (c *Config) loginShellIn(stdin io.Reader, timeout time.Duration, dir, script string, extraEnv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Shell, "-lc", script)
	cmd.Stdin = stdin
	cmd.Env = append(append([]string{}, c.Environ...), extraEnv...)
	cmd.Dir = dir
	if dir == "" {
		cmd.Dir = c.Home
	}
	cmd.WaitDelay = time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("timed out after %v", timeout)
	}
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg == "" {
			msg = err.Error()
		}
		return out.String(), errors.New(msg)
	}
	return out.String(), nil
}

// startEnv runs the repo's environment step in the background, when the
// copy has an env.json.
func (ib *Inbox) startEnv(r *record) {
	if r == nil || r.NoRepo {
		return
	}
	e, err := ib.cfg.readEnvFile(r.Repo)
	if err != nil {
		return
	}
	ib.mu.Lock()
	if ib.envRuns[r.Repo] {
		ib.mu.Unlock()
		return
	}
	ib.envRuns[r.Repo] = true
	ib.mu.Unlock()
	go func() {
		ib.runEnv(r.Repo, r.Dir, e)
		ib.mu.Lock()
		delete(ib.envRuns, r.Repo)
		ib.mu.Unlock()
		ib.notify(nil)
	}()
}

// runEnv is the environment step: each tool through mise, then each
// lockfile's fetch. Its output goes to env.log.
func (ib *Inbox) runEnv(k, dir string, e *agentwire.Environment) {
	c := ib.cfg
	rep := &agentwire.EnvReport{StartedAtMS: nowMS(), Tools: []agentwire.ToolReport{}, Lockfiles: []agentwire.LockReport{}}
	c.writeEnvReport(k, rep)
	logf, err := os.OpenFile(filepath.Join(c.repoDir(k), "env.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		rep.Done, rep.Error, rep.EndedAtMS = true, err.Error(), nowMS()
		c.writeEnvReport(k, rep)
		return
	}
	defer logf.Close()
	_, mise := c.loginShell(10*time.Second, dir, "command -v mise")
	hasMise := mise == nil
	var pins []string
	tools := map[string]string{}
	for _, m := range []map[string]string{e.Tools, e.PackageManagers} {
		for t, v := range m {
			tools[t] = v
			pins = append(pins, misePin(t)+"="+v)
		}
	}
	names := make([]string, 0, len(tools))
	for t := range tools {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		tr := agentwire.ToolReport{Tool: t, Wanted: tools[t], Source: toolSource(dir, t, e.Files)}
		spec := shellquote.Quote(t + "@" + tools[t])
		switch {
		case !hasMise:
			tr.State, tr.Detail = "missing", "mise is not on the login shell's PATH"
		case runLogged(c, logf, dir, "mise where "+spec, pins) == nil:
			tr.State, tr.Installed = "ready", tools[t]
		default:
			if err := runLogged(c, logf, dir, "MISE_YES=1 mise install "+spec, pins); err != nil {
				tr.State, tr.Detail = "failed", err.Error()
			} else {
				tr.State, tr.Installed = "ready", tools[t]
			}
		}
		rep.Tools = append(rep.Tools, tr)
		c.writeEnvReport(k, rep)
	}
	for _, f := range e.Lockfiles {
		lr := agentwire.LockReport{File: f, Command: lockCommand(f)}
		switch {
		case lr.Command == "":
			lr.State, lr.Detail = "skipped", "no fetch command known for it"
		default:
			cmd := lr.Command
			if hasMise {
				cmd = "mise exec -- " + cmd
			}
			lockDir := filepath.Join(dir, filepath.Dir(filepath.Clean("/"+f)))
			if err := runLogged(c, logf, lockDir, cmd, pins); err != nil {
				lr.State, lr.Detail = "failed", err.Error()
			} else {
				lr.State = "done"
			}
		}
		rep.Lockfiles = append(rep.Lockfiles, lr)
		c.writeEnvReport(k, rep)
	}
	rep.Done, rep.EndedAtMS = true, nowMS()
	c.writeEnvReport(k, rep)
}

func runLogged(c *Config, log io.Writer, dir, script string, env []string) error {
	fmt.Fprintf(log, "$ %s\n", script)
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Shell, "-lc", script)
	cmd.Env = append(append([]string{}, c.Environ...), env...)
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	var tail bytes.Buffer
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	if err != nil {
		last := strings.TrimSpace(tail.String())
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		if len(last) > 200 {
			last = last[:200]
		}
		if last == "" {
			last = err.Error()
		}
		return errors.New(last)
	}
	return nil
}

// toolSource is the file that pins tool, among the laptop's files, else
// env.json.
func toolSource(dir, tool string, files []string) string {
	wants := map[string][]string{
		"go":     {"go.mod", "go.work"},
		"rust":   {"rust-toolchain.toml", "rust-toolchain"},
		"node":   {".nvmrc", ".node-version", "package.json"},
		"python": {".python-version", "pyproject.toml"},
	}
	for _, f := range files {
		if filepath.Base(f) == ".tool-versions" || filepath.Base(f) == "mise.toml" {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && bytes.Contains(b, []byte(tool)) {
				return f
			}
		}
		for _, w := range wants[tool] {
			if filepath.Base(f) == w {
				return f
			}
		}
	}
	return "env.json"
}

// lockCommand fetches a lockfile's dependencies without running their
// scripts, or "" when none is known.
func lockCommand(file string) string {
	switch filepath.Base(file) {
	case "go.sum":
		return "go mod download"
	case "Cargo.lock":
		return "cargo fetch"
	case "package-lock.json":
		return "npm ci --ignore-scripts"
	case "pnpm-lock.yaml":
		return "pnpm fetch"
	case "yarn.lock":
		return "yarn install --frozen-lockfile --ignore-scripts"
	case "uv.lock":
		return "uv sync --frozen"
	case "poetry.lock":
		return "poetry install --no-root"
	case "Gemfile.lock":
		return "bundle install"
	}
	return ""
}

// env answers the env op: the report once the step this inbox runs has
// ended, or at wait_ms with done false.
func (ib *Inbox) env(ctx context.Context, req Request) (*Response, error) {
	if req.WaitMS < 0 || time.Duration(req.WaitMS)*time.Millisecond > MaxEnvWait {
		return nil, usagef("wait_ms %d: want 0 to %d", req.WaitMS, MaxEnvWait.Milliseconds())
	}
	return ib.poll(ctx, time.Duration(req.WaitMS)*time.Millisecond, func() (*Response, bool, error) {
		ib.mu.Lock()
		running := ib.envRuns[req.Repo]
		ib.mu.Unlock()
		rep, err := ib.cfg.readEnvReport(req.Repo)
		if err != nil {
			return nil, false, err
		}
		if rep != nil && !rep.Done && !running {
			return nil, false, failedf("the environment step of %s was cut short by an inbox restart; run it again with a new send --prepare", req.Repo)
		}
		return &Response{Report: rep}, rep == nil || rep.Done, nil
	})
}
