package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestAgentScripts runs testdata/agent: the box half of offload driven
// through `cocoonbox rsh` against the script's local box, with a real tmux
// and the stand-in CLI (testdata/standin/standin-cli).
func TestAgentScripts(t *testing.T) {
	standin, err := filepath.Abs("testdata/standin/standin-cli")
	if err != nil {
		t.Fatal(err)
	}
	p := params(t, "testdata/agent")
	p.Cmds["standin"] = func(ts *testscript.TestScript, neg bool, args []string) { cmdStandin(ts, neg, args, standin) }
	p.Cmds["snapshot"] = cmdSnapshot
	p.Cmds["waitstatus"] = cmdWaitStatus
	p.Cmds["jsonline"] = cmdJSONLine
	testscript.Run(t, p)
}

// standin KIND [signed-out]: install the stand-in CLI into box main as
// ~/.local/bin/KIND, on the login shell's PATH, signed in unless told.
func cmdStandin(ts *testscript.TestScript, neg bool, args []string, src string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: standin KIND [signed-out]")
	}
	home := ts.Getenv("BOX_HOME")
	bin := filepath.Join(home, ".local", "bin")
	ts.Check(os.MkdirAll(bin, 0o755))
	data, err := os.ReadFile(src)
	ts.Check(err)
	ts.Check(os.WriteFile(filepath.Join(bin, args[0]), data, 0o755))
	// As a Debian ~/.profile does: ~/.local/bin on a login shell's PATH.
	profile := "if [ -d \"$HOME/.local/bin\" ]; then PATH=\"$HOME/.local/bin:$PATH\"; fi\n"
	ts.Check(os.WriteFile(filepath.Join(home, ".profile"), []byte(profile), 0o644))
	// The box user's git identity, for the CLI's commits.
	gitconfig := "[user]\n\tname = Box User\n\temail = box-user@example.com\n"
	ts.Check(os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(gitconfig), 0o644))
	state := filepath.Join(home, ".standin")
	ts.Check(os.MkdirAll(state, 0o755))
	// What a user's install would make is the box user's.
	defer boxown(ts, false, []string{filepath.Join(home, ".local"), filepath.Join(home, ".profile"), filepath.Join(home, ".gitconfig"), state})
	signed := filepath.Join(state, "signed-in-"+args[0])
	if len(args) == 2 && args[1] == "signed-out" {
		os.Remove(signed)
		return
	}
	ts.Check(os.WriteFile(signed, []byte("box-user@example.com\n"), 0o644))
}

// snapshot REPO ID: make S of REPO as the laptop half does (the work tree
// as git add -A sees it, in a temporary index, committed with HEAD as
// parent) and point refs/cocoonbox/offload/ID at it.
func cmdSnapshot(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: snapshot REPO ID")
	}
	repo := ts.MkAbs(args[0])
	idx := filepath.Join(ts.MkAbs("."), ".snapshot-index")
	os.Remove(idx)
	defer os.Remove(idx)
	git := func(env []string, a ...string) string {
		ts.Check(ts.Exec("env", append(append(env, "git", "-C", repo), a...)...))
		return strings.TrimSpace(ts.ReadFile("stdout"))
	}
	// The copy keeps the index's mtime, or git would trust the stat data
	// of entries as new as the index (racy git) and miss a same-second edit.
	real := filepath.Join(repo, ".git", "index")
	if fi, err := os.Stat(real); err == nil {
		b, err := os.ReadFile(real)
		ts.Check(err)
		ts.Check(os.WriteFile(idx, b, 0o600))
		ts.Check(os.Chtimes(idx, fi.ModTime(), fi.ModTime()))
	}
	tmp := []string{"GIT_INDEX_FILE=" + idx}
	git(tmp, "add", "-A")
	tree := git(tmp, "write-tree")
	args2 := []string{"commit-tree", tree, "-m", "cocoonbox offload " + args[1]}
	if err := ts.Exec("git", "-C", repo, "rev-parse", "--verify", "-q", "HEAD"); err == nil {
		args2 = append(args2, "-p", strings.TrimSpace(ts.ReadFile("stdout")))
	}
	s := git(nil, args2...)
	git(nil, "update-ref", "refs/cocoonbox/offload/"+args[1], s)
}

// waitstatus REPO STATUS: wait (at most 60 s) until box main's offload
// status says the repo's session is STATUS.
func cmdWaitStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitstatus REPO STATUS")
	}
	deadline := time.Now().Add(60 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		if err := ts.Exec("cocoonbox", "rsh", "main", "cocoonbox-agent", "offload", "status", "--repo", args[0]); err == nil {
			var out struct {
				Sessions []struct{ Status string } `json:"sessions"`
			}
			if json.Unmarshal([]byte(ts.ReadFile("stdout")), &out) == nil && len(out.Sessions) == 1 {
				last = out.Sessions[0].Status
				if last == args[1] {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("%s's status is still %q, not %q", args[0], last, args[1])
}

// jsonline [PATH=VALUE...]: the last command's stdout is exactly one line
// holding one JSON object, and each dotted PATH in it has VALUE (a string,
// or a number, bool or null as JSON writes it).
func cmdJSONLine(ts *testscript.TestScript, neg bool, args []string) {
	out := ts.ReadFile("stdout")
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		ts.Fatalf("stdout is not exactly one line: %q", out)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		ts.Fatalf("stdout is not a JSON object: %v", err)
	}
	for _, a := range args {
		path, want, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("jsonline: want PATH=VALUE, got %q", a)
		}
		var cur any = v
		for _, k := range strings.Split(path, ".") {
			switch c := cur.(type) {
			case map[string]any:
				cur = c[k]
			case []any:
				var i int
				if _, err := fmt.Sscan(k, &i); err != nil || i < 0 || i >= len(c) {
					cur = nil
				} else {
					cur = c[i]
				}
			default:
				cur = nil
			}
		}
		got := ""
		switch c := cur.(type) {
		case string:
			got = c
		default:
			b, _ := json.Marshal(c)
			got = string(b)
		}
		if (got == want) == neg {
			ts.Fatalf("%s is %s, want %s%s", path, got, map[bool]string{true: "not ", false: ""}[neg], want)
		}
	}
}
