package boxagent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// probeTimeout bounds each preflight probe of a CLI.
const probeTimeout = 20 * time.Second

// Begin is the box half of the preflight; without a block it takes the
// copy for the offload id, records the name and makes the copy's
// directory.
func (c *Config) Begin(o agentwire.BeginRequest) (*agentwire.BeginResult, error) {
	if err := checkKey(o.Repo); err != nil {
		return nil, err
	}
	if o.Name == "" || !ValidName(o.Name) {
		return nil, usagef("bad or missing --name %q: use 1 to 100 of A-Z, a-z, 0-9, _, - and ., not starting with .", o.Name)
	}
	unlock, err := c.holdOffload(o.Repo, o.Kind, o.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	dir := c.copyDir(o.Name)
	findings := []agentwire.Finding{}
	block := func(check, detail string) {
		findings = append(findings, agentwire.Finding{Check: check, Outcome: "block", Detail: detail})
	}

	// The tools' login shell runs beside the CLI's, which start the CLI
	// one after the other.
	c.logf("checking the box's tools and %s", agentwire.KindOf(o.Kind).Binary())
	type shellOut struct {
		out string
		err error
	}
	tools := make(chan shellOut, 1)
	go func() {
		out, err := c.loginShell(probeTimeout, "", `for t in git rsync tmux mise; do command -v "$t" >/dev/null 2>&1 || printf '%s\n' "$t"; done`)
		tools <- shellOut{out, err}
	}()
	cli, cliFindings := c.probeCLI(o.Kind)
	if t := <-tools; t.err != nil {
		block("box_tools", "the login shell failed: "+t.err.Error())
	} else if missing := strings.Fields(t.out); len(missing) > 0 {
		block("box_tools", "missing on the box's login PATH: "+strings.Join(missing, ", "))
	}
	findings = append(findings, cliFindings...)

	sessions, err := c.call(Request{Op: "status"})
	if err != nil {
		return nil, err
	}
	rec, err := c.readRecord(o.Repo)
	if err != nil {
		return nil, err
	}
	state := rec.copyState()
	if rec != nil && rec.Name != o.Name && state != CopyAbsent {
		block("copy", "the copy of "+o.Repo+" is "+rec.Dir+", not "+dir)
	}
	switch state {
	case CopyUnreturned, CopyBusy:
		block("copy", "the copy of "+o.Repo+" is "+state+": bring the last offload back first")
	}
	idx, err := c.readIndex()
	if err != nil {
		return nil, err
	}
	for k, n := range idx {
		if n == o.Name && k != o.Repo {
			if other, _ := c.readRecord(k); other.copyState() != CopyAbsent {
				block("copy", dir+" holds the copy of another repo ("+k+")")
			}
		}
	}
	if state == CopyAbsent {
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			block("copy", dir+" exists and is not an offload copy; move it away first")
		}
	}
	running := 0
	for _, s := range sessions.Sessions {
		if s.Repo != o.Repo && s.Copy == CopyBusy {
			running++
		}
	}
	if running >= MaxSessions {
		block("sessions", "3 box sessions are running; end one first")
	}

	for _, f := range findings {
		if f.Outcome == "block" {
			return nil, &Error{Code: agentwire.CodeRefused, Err: errors.New(f.Check + ": " + f.Detail), Findings: findings, CLI: cli}
		}
	}
	if cli.HooksBlocked != nil && *cli.HooksBlocked != "" {
		findings = append(findings, agentwire.Finding{Check: "hooks", Outcome: "warn", Detail: *cli.HooksBlocked + " turns off our hooks: statuses will not come through"})
	}

	res := &agentwire.BeginResult{OK: true, Dir: dir, Copy: state, Refs: map[string]string{}, CLI: cli, Ignored: []string{}, Findings: findings}
	if state != CopyAbsent && !o.NoRepo && !c.isRepo(dir) {
		// An offload that failed before its history came (rsync brings
		// .git without objects) leaves a copy that is no repository: it
		// holds nothing of the box's, so the laptop sends it whole.
		c.logf("%s is no git repository: taken as absent", dir)
		res.Copy = CopyAbsent
	} else if state != CopyAbsent && !o.NoRepo {
		if res.Refs, err = c.presentRefs(dir); err != nil {
			return nil, err
		}
		if res.Ignored, err = c.ignoredDirs(dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := c.update(o.Repo, func(r *record) (*record, error) {
		if r == nil || r.Dir != dir {
			r = &record{Repo: o.Repo, Status: StatusStopped}
		}
		r.Name, r.Dir, r.CLI, r.OffloadID, r.NoRepo = o.Name, dir, o.Kind, o.ID, o.NoRepo
		return r, nil
	}); err != nil {
		return nil, err
	}
	if err := c.updateShared(func(idx map[string]string) { idx[o.Repo] = o.Name }); err != nil {
		return nil, err
	}
	c.logf("took the copy %s for offload %s", dir, o.ID)
	return res, nil
}

// notInstalled is what probeCLI's login shell prints when the CLI is not
// on the login PATH.
const notInstalled = "cocoonbox-agent:not-on-the-login-PATH"

var emailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)

// probeCLI checks the kind's CLI on the login PATH: installed, its
// version, signed in and as whom. Only an email address is ever taken from
// its output, so no key it prints can reach ours.
func (c *Config) probeCLI(kind string) (*agentwire.CLIInfo, []agentwire.Finding) {
	k := agentwire.KindOf(kind)
	bin := k.Binary()
	info := &agentwire.CLIInfo{Kind: kind}
	var findings []agentwire.Finding
	if files := k.HookSettings(c.Home); files != nil {
		h := hooksBlocked(files)
		info.HooksBlocked = &h
	}
	// One login shell looks the CLI up and asks its version.
	out, err := c.loginShell(probeTimeout, "", "command -v "+bin+" >/dev/null 2>&1 || { printf '%s\\n' "+notInstalled+"; exit 127; }; exec "+bin+" --version")
	if err != nil && strings.Contains(out, notInstalled) {
		return info, []agentwire.Finding{{Check: "box_cli", Outcome: "block", Detail: bin + " is not installed in the box"}}
	}
	if err == nil {
		info.Version, _, _ = strings.Cut(strings.TrimSpace(out), "\n")
	} else {
		return info, []agentwire.Finding{{Check: "box_cli", Outcome: "block", Detail: bin + " --version failed in the box: " + err.Error()}}
	}
	out, err = c.loginShell(probeTimeout, "", k.SignInStatus()+" 2>&1")
	info.SignedIn = err == nil
	st := k.ReadSignIn(out)
	if st.SignedIn != nil {
		info.SignedIn = info.SignedIn && *st.SignedIn
		info.Account = st.Account
	}
	info.ByKey, info.KeySource = info.SignedIn && st.ByKey, st.KeySource
	if low := strings.ToLower(out); strings.Contains(low, "not logged in") || strings.Contains(low, "not signed in") {
		info.SignedIn = false
	}
	if info.Account == "" && info.SignedIn {
		info.Account = emailRE.FindString(out)
	}
	if !info.SignedIn {
		findings = append(findings, agentwire.Finding{Check: "box_cli", Outcome: "block", Detail: bin + " is signed out in the box"})
	}
	if k.Unsupported() != "" {
		findings = append(findings, agentwire.Finding{Check: "box_cli", Outcome: "block", Detail: bin + " sessions are not supported by this box's agent yet"})
	}
	return info, findings
}

// hooksBlocked is the first of files (a kind's HookSettings) that sets
// allowManagedHooksOnly or disableAllHooks, else "".
func hooksBlocked(files []string) string {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var s struct {
			AllowManagedHooksOnly bool `json:"allowManagedHooksOnly"`
			DisableAllHooks       bool `json:"disableAllHooks"`
		}
		if json.Unmarshal(b, &s) == nil && (s.AllowManagedHooksOnly || s.DisableAllHooks) {
			return f
		}
	}
	return ""
}

// isRepo says whether dir is the top of a git repository of its own:
// git finds its .git there, not in a directory above.
func (c *Config) isRepo(dir string) bool {
	gd, err := c.git(dir, nil, []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir)}, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(filepath.Join(dir, ".git"))
	if err != nil {
		return false
	}
	got, err := filepath.EvalSymlinks(strings.TrimSpace(gd))
	return err == nil && got == want
}
