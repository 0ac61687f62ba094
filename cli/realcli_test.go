package cli_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cocoonbox/cocoonbox/internal/modeltest"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// realCLI is one pinned real CLI of testdata/realcli/versions.
type realCLI struct{ kind, pkg, version, dir string }

// realCLIs reads testdata/realcli/versions and finds each CLI where
// scripts/deps.sh installs it. A CLI that is not there fails the test:
// these tests never skip.
func realCLIs(t *testing.T) map[string]realCLI {
	f, err := os.Open("testdata/realcli/versions")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var roots []string
	if d := os.Getenv("COCOONBOX_TEST_CLIS"); d != "" {
		roots = append(roots, d)
	}
	home, _ := os.UserHomeDir()
	roots = append(roots, "/opt/cocoonbox-test/clis", filepath.Join(home, ".cache", "cocoonbox-test", "clis"))
	out := map[string]realCLI{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		c := realCLI{kind: fs[0], pkg: fs[1], version: fs[2]}
		for _, r := range roots {
			d := filepath.Join(r, c.kind+"@"+c.version)
			if fi, err := os.Stat(filepath.Join(d, "bin", c.kind)); err == nil && !fi.IsDir() {
				c.dir = d
				break
			}
		}
		if c.dir == "" {
			t.Fatalf("%s@%s is not installed under %s: run scripts/deps.sh test (make test does)", c.pkg, c.version, strings.Join(roots, " or "))
		}
		out[c.kind] = c
	}
	return out
}

// TestRealCLIScripts runs testdata/realcli: offload and back end to end
// with the real Claude Code and Codex CLIs (pinned in
// testdata/realcli/versions, installed by scripts/deps.sh) in box main,
// talking to a scripted model endpoint (internal/modeltest) that this
// process serves. When the test runs as root the local box runs box
// commands as the box user `user` (deps.sh makes it), as a real box does:
// the CLIs refuse their bypass mode as root.
func TestRealCLIScripts(t *testing.T) {
	clis := realCLIs(t)
	bin, err := exec.LookPath("cocoonbox")
	if err != nil {
		t.Fatal(err)
	}
	boxUser := ""
	if os.Geteuid() == 0 {
		boxUser = localbox.DefaultUser
		// testscript's directory of our binaries (cocoonbox-agent among
		// them) is 0700; the box user must run cocoonbox-agent from it.
		os.Chmod(filepath.Dir(filepath.Dir(bin)), 0o711)
		os.Chmod(filepath.Dir(bin), 0o755)
	}
	models := map[string]*modeltest.Server{}
	p := paramsWith(t, "testdata/realcli", func(e *testscript.Env, srv *localbox.Server) error {
		// claude_asroot plays a local box served by root without a box user.
		if strings.HasSuffix(e.WorkDir, "asroot") {
			srv.User = ""
		} else if boxUser != "" {
			// The box user reaches the state directory under $WORK.
			for _, d := range []string{filepath.Dir(e.WorkDir), e.WorkDir} {
				if err := os.Chmod(d, 0o711); err != nil {
					return err
				}
			}
			srv.User = boxUser
		}
		// The server's log, for scripts to scan (keyscan).
		logf, err := os.OpenFile(filepath.Join(e.WorkDir, "server.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		e.Defer(func() { logf.Close() })
		var logMu sync.Mutex
		srv.Logf = func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			fmt.Fprintf(logf, format+"\n", args...)
		}
		// A laptop-side CLI in a terminal runs in a tmux server on
		// $WORK/tmux.sock, ended with the script, failed or not; so is
		// what it leaves running from $WORK: codex's TUI starts its
		// app-server as a daemon from $HOME/.codex/packages, which
		// outlives it.
		work := e.WorkDir
		e.Defer(func() {
			exec.Command("tmux", "-S", filepath.Join(work, "tmux.sock"), "kill-server").Run()
			// A CLI ending may start its daemon on the way out, and the
			// daemon's watcher may start it again: scan until a scan
			// after the first finds none (5 s at most), killing.
			for i := 0; i < 50; i++ {
				sig := syscall.SIGTERM
				if i > 0 {
					sig = syscall.SIGKILL
				}
				if endProcsUnder(work, sig) == 0 && i > 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		m, err := modeltest.Start(filepath.Join(e.WorkDir, "model.log"))
		if err != nil {
			return err
		}
		e.Defer(func() { m.Close() })
		models[e.WorkDir] = m
		e.Setenv("MODEL_URL", m.URL)
		e.Setenv("MODEL_LOG", filepath.Join(e.WorkDir, "model.log"))
		for k, c := range clis {
			e.Setenv(strings.ToUpper(k)+"_VERSION", c.version)
			e.Setenv(strings.ToUpper(k)+"_BIN", filepath.Join(c.dir, "bin"))
		}
		return nil
	})
	p.Condition = func(cond string) (bool, error) {
		if cond == "root" {
			return os.Geteuid() == 0, nil
		}
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	p.Cmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"realcli":      func(ts *testscript.TestScript, neg bool, args []string) { cmdRealCLI(ts, neg, args, clis) },
		"modelprompts": func(ts *testscript.TestScript, neg bool, args []string) { cmdModelPrompts(ts, neg, args, models) },
		"modelfault":   func(ts *testscript.TestScript, neg bool, args []string) { cmdModelFault(ts, neg, args, models) },
		"modeltools":   func(ts *testscript.TestScript, neg bool, args []string) { cmdModelTools(ts, neg, args, models) },
		"waitgrep":     cmdWaitGrep,
		"jsonline":     cmdJSONLine,
		"modelkey":     func(ts *testscript.TestScript, neg bool, args []string) { cmdModelKey(ts, neg, args, models) },
		"procwatch":    cmdProcWatch,
		"keyscan":      cmdKeyScan,
	}
	testscript.Run(t, p)
}

// realcli KIND [signed-out] [no-retries]: put the real CLI into box main
// as a user's npm install would (~/.local/bin/KIND, linked to the
// machine's one install), with a git identity and the scripted model
// endpoint, and signed in with an API key unless told: claude reads
// ANTHROPIC_API_KEY from the login shell's environment; codex gets a model
// provider in ~/.codex/config.toml that reads OPENAI_API_KEY, and `codex
// login --with-api-key`. Signed out, no key is anywhere, and codex's
// provider takes the key of codex's own login (requires_openai_auth), as
// the built-in OpenAI provider does. It runs in the box as the box user,
// through cocoonbox rsh. no-retries turns the CLI's own retries of a
// failed model request off, so that a failure ends the turn at once:
// claude's CLAUDE_CODE_MAX_RETRIES=0 (its bundle reads the variable; by
// default it retried a refused connection 10 times over about 3 minutes),
// codex's provider request_max_retries = 0 and stream_max_retries = 0 (by
// default it retried a 500 for 25 s).
func cmdRealCLI(ts *testscript.TestScript, neg bool, args []string, clis map[string]realCLI) {
	signedIn, retries := true, true
	for _, a := range args[min(1, len(args)):] {
		switch a {
		case "signed-out":
			signedIn = false
		case "no-retries":
			retries = false
		default:
			ts.Fatalf("usage: realcli KIND [signed-out] [no-retries]")
		}
	}
	if neg || len(args) < 1 {
		ts.Fatalf("usage: realcli KIND [signed-out] [no-retries]")
	}
	c, ok := clis[args[0]]
	if !ok {
		ts.Fatalf("no real CLI %q in testdata/realcli/versions", args[0])
	}
	url := ts.Getenv("MODEL_URL")
	var sh strings.Builder
	fmt.Fprintf(&sh, "set -e\nmkdir -p ~/.local/bin\nln -sfn %s ~/.local/bin/%s\n", filepath.Join(c.dir, "bin", c.kind), c.kind)
	// A real box has cocoonbox-agent on every login PATH; the local box
	// puts it on the PATH of the commands it starts only, and codex's
	// shell tool runs a login shell, whose /etc/profile resets PATH.
	sh.WriteString("ln -sfn \"$(command -v cocoonbox-agent)\" ~/.local/bin/cocoonbox-agent\n")
	sh.WriteString("git config --global user.name 'Box User'\ngit config --global user.email box-user@example.com\n")
	sh.WriteString("grep -q '.local/bin' ~/.profile 2>/dev/null || echo 'PATH=\"$HOME/.local/bin:$PATH\"' >> ~/.profile\n")
	switch c.kind {
	case "claude":
		// The box's one install is not the user's to update; a user whose
		// install cannot update sets the same.
		fmt.Fprintf(&sh, "echo 'export ANTHROPIC_BASE_URL=%s DISABLE_AUTOUPDATER=1' >> ~/.profile\n", url)
		if !retries {
			sh.WriteString("echo 'export CLAUDE_CODE_MAX_RETRIES=0' >> ~/.profile\n")
		}
		if signedIn {
			sh.WriteString("echo 'export ANTHROPIC_API_KEY=sk-ant-api03-scripted-endpoint-key-0123456789' >> ~/.profile\n")
		}
	case "codex":
		auth := "requires_openai_auth = true"
		noRetries := ""
		if !retries {
			noRetries = "request_max_retries = 0\nstream_max_retries = 0\n"
		}
		if signedIn {
			auth = "env_key = \"OPENAI_API_KEY\""
		}
		fmt.Fprintf(&sh, "mkdir -p ~/.codex\ncat > ~/.codex/config.toml <<'EOF'\nmodel = \"gpt-5.1-codex\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = \"%s/v1\"\nwire_api = \"responses\"\n%s\n%sEOF\n", url, auth, noRetries)
		if signedIn {
			sh.WriteString("echo 'export OPENAI_API_KEY=sk-scripted-endpoint-key-0123456789' >> ~/.profile\n")
			sh.WriteString(". ~/.profile; printenv OPENAI_API_KEY | codex login --with-api-key >/dev/null 2>&1\n")
		}
	}
	if err := ts.Exec("cocoonbox", "rsh", "main", "--", "sh", "-c", sh.String()); err != nil {
		ts.Fatalf("set up %s in box main: %v\n%s", c.kind, err, ts.ReadFile("stderr"))
	}
}

// modelprompts: stdout becomes every distinct prompt the scripted model
// received (the latest user text of each main request), in order, each
// after a line "--- prompt N".
func cmdModelPrompts(ts *testscript.TestScript, neg bool, args []string, models map[string]*modeltest.Server) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: modelprompts")
	}
	m := models[ts.Getenv("WORK")]
	var b strings.Builder
	n, last := 0, ""
	for _, r := range m.Requests() {
		p := r.Prompt()
		if p == "" || p == last {
			continue
		}
		n++
		last = p
		fmt.Fprintf(&b, "--- prompt %d\n%s\n", n, p)
	}
	fmt.Fprint(ts.Stdout(), b.String())
}

// modelfault none|refuse|STATUS: the scripted endpoint fails the CLIs'
// model requests from now on: refuse closes its port (connections are
// refused), a status (500, 529, 401) is answered with the vendor's error
// body; none serves again, on the same port.
func cmdModelFault(ts *testscript.TestScript, neg bool, args []string, models map[string]*modeltest.Server) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: modelfault none|refuse|STATUS")
	}
	f, err := modeltest.ParseFault(args[0])
	ts.Check(err)
	ts.Check(models[ts.Getenv("WORK")].SetFault(f))
}

// waitgrep GLOB REGEXP: wait (at most 60 s) until a file matching GLOB has
// a line matching REGEXP.
func cmdWaitGrep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitgrep GLOB REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		files, _ := filepath.Glob(ts.MkAbs(args[0]))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && re.Match(b) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("no file %s has a line matching %s", args[0], args[1])
}

// modelkey API KEY: the scripted model was asked for answers on API
// (messages: Anthropic's, claude; responses: OpenAI's, codex) with KEY,
// in x-api-key or as Authorization's Bearer, and no request on API
// carried another key.
func cmdModelKey(ts *testscript.TestScript, neg bool, args []string, models map[string]*modeltest.Server) {
	if neg || len(args) != 2 || (args[0] != "messages" && args[0] != "responses") {
		ts.Fatalf("usage: modelkey messages|responses KEY")
	}
	answered := 0
	for _, r := range models[ts.Getenv("WORK")].Requests() {
		if !strings.Contains(r.Path, "/"+args[0]) {
			continue
		}
		for _, k := range r.Keys {
			if k != args[1] {
				ts.Fatalf("%s %s carried another key, %s…", r.Method, r.Path, k[:min(len(k), 12)])
			}
		}
		if r.HasKey && (r.Answer == "text" || strings.HasPrefix(r.Answer, "tool:")) {
			answered++
		}
	}
	if answered == 0 {
		ts.Fatalf("no request the model answered carried the key")
	}
}

// procWatches are the running procwatch scans, by script ($WORK).
var procWatches sync.Map

// procWatch is one procwatch scan: what it saw, once stopped.
type procWatch struct {
	stop chan struct{}
	done chan string
}

// procwatch start WORD... | procwatch stop: scan every process's argv
// and environment (/proc/*/cmdline, /proc/*/environ) for each WORD every
// 20 ms from start to stop; stop fails naming the first process that held
// one (with !, stop fails when none did).
func cmdProcWatch(ts *testscript.TestScript, neg bool, args []string) {
	key := ts.Getenv("WORK")
	switch {
	case !neg && len(args) >= 2 && args[0] == "start":
		w := &procWatch{stop: make(chan struct{}), done: make(chan string, 1)}
		if _, loaded := procWatches.LoadOrStore(key, w); loaded {
			ts.Fatalf("procwatch is running already")
		}
		var words [][]byte
		for _, a := range args[1:] {
			words = append(words, []byte(a))
		}
		self := strconv.Itoa(os.Getpid())
		go func() {
			seen := ""
			for {
				ents, _ := os.ReadDir("/proc")
				for _, e := range ents {
					if e.Name() == self || e.Name()[0] < '0' || e.Name()[0] > '9' || seen != "" {
						continue
					}
					for _, f := range []string{"cmdline", "environ"} {
						b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), f))
						for _, w := range words {
							if bytes.Contains(b, w) {
								comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
								seen = fmt.Sprintf("pid %s (%s) had %.12s… in its %s", e.Name(), strings.TrimSpace(string(comm)), w, f)
							}
						}
					}
				}
				select {
				case <-w.stop:
					w.done <- seen
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	case len(args) == 1 && args[0] == "stop":
		v, ok := procWatches.LoadAndDelete(key)
		if !ok {
			ts.Fatalf("procwatch is not running")
		}
		w := v.(*procWatch)
		close(w.stop)
		seen := <-w.done
		switch {
		case seen != "" && !neg:
			ts.Fatalf("a word was in a process's argv or environment: %s", seen)
		case seen == "" && neg:
			ts.Fatalf("no process had a word in its argv or environment")
		}
		if seen != "" {
			ts.Logf("%s", seen)
		}
	default:
		ts.Fatalf("usage: procwatch start WORD... | procwatch stop")
	}
}

// keyscan WORD PATH...: stdout becomes one line for each regular file
// under the PATHs (links not followed) that holds WORD: its path relative
// to $WORK, its mode and its directory's mode, sorted.
func cmdKeyScan(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: keyscan WORD PATH...")
	}
	word := []byte(args[0])
	work := ts.Getenv("WORK")
	var lines []string
	for _, root := range args[1:] {
		err := filepath.WalkDir(ts.MkAbs(root), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil || !bytes.Contains(b, word) {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			di, err := os.Lstat(filepath.Dir(p))
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(work, p)
			lines = append(lines, fmt.Sprintf("%s %04o %04o", filepath.ToSlash(rel), fi.Mode().Perm(), di.Mode().Perm()))
			return nil
		})
		ts.Check(err)
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(ts.Stdout(), l)
	}
}

// endProcsUnder sends sig to each process whose executable is under dir
// (a script's $WORK), so that nothing a script started outlives it, and
// returns how many it found.
func endProcsUnder(dir string, sig syscall.Signal) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.HasPrefix(exe, dir+string(filepath.Separator)) {
			if p, err := os.FindProcess(pid); err == nil && p.Signal(sig) == nil {
				n++
			}
		}
	}
	return n
}
