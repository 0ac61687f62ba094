package offload

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// shExec runs a command line with sh -c, as a box does, with PATH set.
type shExec struct{ path string }

func (x shExec) Exec(ctx context.Context, cmd *box.Command) (box.ExitStatus, error) {
	c := exec.CommandContext(ctx, "sh", "-c", cmd.Line)
	c.Env = []string{"PATH=" + x.path}
	c.Stdin, c.Stdout, c.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			return box.ExitStatus{Signal: ws.Signal().String()}, nil
		}
		return box.ExitStatus{Code: ee.ExitCode()}, nil
	}
	return box.ExitStatus{}, err
}

// fakeAgent installs a cocoonbox-agent that records its argv and stdin
// and prints answer.
func fakeAgent(t *testing.T, answer string, code int) (shExec, string) {
	t.Helper()
	dir := t.TempDir()
	rec := filepath.Join(dir, "argv")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " + rec + "\ncat > " + rec + ".stdin\necho progress >&2\nprintf '%s\\n' '" + answer + "'\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "cocoonbox-agent"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return shExec{path: dir + ":/usr/bin:/bin"}, rec
}

func TestAgentBegin(t *testing.T) {
	x, rec := fakeAgent(t, `{"ok":true,"dir":"/workspace/my-app","copy":"mirror","refs":{"refs/heads/main":"`+strings.Repeat("a", 40)+`"},"cli":{"kind":"claude","version":"2.1.0","signed_in":true,"account":"a@b.c","hooks_blocked":null},"ignored":["target/"],"findings":[]}`, 0)
	var progress strings.Builder
	a := &Agent{Exec: x, Box: "main", Progress: &progress}
	got, err := a.Begin(context.Background(), "k1", "my-app", "claude", "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	want := &agentwire.BeginResult{OK: true, Dir: "/workspace/my-app", Copy: "mirror", Refs: map[string]string{"refs/heads/main": strings.Repeat("a", 40)},
		CLI: &agentwire.CLIInfo{Kind: "claude", Version: "2.1.0", SignedIn: true, Account: "a@b.c"}, Ignored: []string{"target/"}, Findings: []agentwire.Finding{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := readFile(t, rec); got != "offload\nbegin\n--repo\nk1\n--name\nmy-app\n--kind\nclaude\n--id\n0123456789abcdef\n" {
		t.Errorf("argv:\n%s", got)
	}
	if progress.String() != "progress\n" {
		t.Errorf("progress %q", progress.String())
	}
}

func TestAgentMessageQuoting(t *testing.T) {
	x, rec := fakeAgent(t, `{"ok":true,"seq":7,"delivery":"queued"}`, 0)
	a := &Agent{Exec: x, Box: "main"}
	text := "it's $(touch /tmp/pwned) `id`; \"quoted\"\nsecond line"
	m, err := a.Message(context.Background(), "k-1", text)
	if err != nil || m.Seq != 7 || m.Delivery != "queued" {
		t.Fatalf("got %+v, %v", m, err)
	}
	if got := readFile(t, rec+".stdin"); got != text {
		t.Errorf("stdin %q", got)
	}
	if got := shellquote.Word("a b'c"); got != `'a b'\''c'` {
		t.Errorf("ShellQuote: %s", got)
	}
}

func TestAgentErrors(t *testing.T) {
	ctx := context.Background()
	x, _ := fakeAgent(t, `{"ok":false,"code":"refused","error":"box_cli: claude is signed out in the box","findings":[{"check":"box_cli","outcome":"block","detail":"claude is signed out"}],"cli":{"kind":"claude","version":"2.1.0","signed_in":false}}`, 3)
	_, err := (&Agent{Exec: x, Box: "main"}).Begin(ctx, "k", "n", "claude", "1")
	var ae *AgentError
	if !errors.As(err, &ae) || !ae.Refused() || ae.Exit != 3 || len(ae.Findings) != 1 || ae.CLI == nil || ae.CLI.SignedIn {
		t.Fatalf("got %#v", err)
	}
	o := &Offloader{Kind: agentwire.KindOf("claude"), Box: "main"}
	e := o.beginError(err, false).(*Error)
	if e.Error() != "box main refused the offload" {
		t.Errorf("a refusal says %q, want one line of ours above the findings", e.Error())
	}
	if e.Code != ExitRefused || len(e.Next) != 1 || !hasCommand(e.Next[0], Command{Verb: VerbSignIn, Kind: "claude", Box: "main"}) {
		t.Errorf("a signed-out CLI: %+v", e)
	}
	ae.CLI.Version = ""
	e = o.beginError(err, false).(*Error)
	if len(e.Next) != 2 || !hasCommand(e.Next[0], Command{Verb: VerbInstallCLI, Kind: "claude", Box: "main"}) {
		t.Errorf("a missing CLI: %+v", e)
	}

	_, err = (&Agent{Exec: shExec{path: t.TempDir()}, Box: "main"}).Status(ctx, "")
	if !errors.As(err, &ae) || ae.Exit != 127 || !strings.Contains(ae.Msg, "not installed in box main") {
		t.Errorf("no agent: %v", err)
	}
	x, _ = fakeAgent(t, `not json`, 1)
	if _, err := (&Agent{Exec: x, Box: "main"}).Status(ctx, ""); !errors.As(err, &ae) || !strings.Contains(ae.Msg, "not JSON") {
		t.Errorf("not JSON: %v", err)
	}
}

// TestAgentBackStart: the start of back's wait is one Exec of the verbs
// the contract runs one by one: read from the outbox's start, then,
// unless the copy holds the offload's S', status, send --back and a read
// that waits after the last seq the first read returned (not one a body
// names); a refused BACK waits for nothing.
func TestAgentBackStart(t *testing.T) {
	const id = "0123456789abcdef"
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := `#!/bin/sh
echo "$*" >> ` + calls + `
case "$2 $*" in
"read "*--wait*) echo '{"ok":true,"entries":[{"seq":8,"kind":"back","offload_id":"` + id + `","body":"done"}],"status":"idle"}' ;;
"read "*) if [ -e ` + filepath.Join(dir, "fault") + ` ]; then echo '{"ok":true,"entries":[],"status":"idle","fault":{"kind":"dialog","line":"Do you trust the files in this folder?","at_ms":1,"age_ms":2}}'; exit 0; fi
	echo '{"ok":true,"entries":[{"seq":3,"kind":"progress","offload_id":"` + id + `","body":"a \"seq\":99 body"},{"seq":7,"kind":"question","offload_id":"` + id + `","body":"?"}],"status":"idle"}' ;;
"status "*) echo '{"ok":true,"sessions":[{"repo":"k","offload_id":"` + id + `","status":"idle","hook_at_ms":5}]}' ;;
"send "*) if [ -e ` + filepath.Join(dir, "refuse") + ` ]; then echo '{"ok":false,"code":"refused","error":"no running session"}'; exit 3; fi
	echo '{"ok":true,"seq":1,"delivery":"pasted"}' ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "cocoonbox-agent"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	a := &Agent{Exec: shExec{path: dir + ":/usr/bin:/bin"}, Box: "main"}
	ctx := context.Background()
	start := func() (*BackStart, string, error) {
		t.Helper()
		os.Remove(calls)
		bs, err := a.BackStart(ctx, "k", id, r.Top, time.Minute, nil)
		return bs, readFile(t, calls), err
	}

	bs, got, err := start()
	if err != nil {
		t.Fatal(err)
	}
	if want := "offload read --repo k --since 0\noffload status --repo k\noffload send --repo k --back\noffload read --repo k --since 7 --wait 60\n"; got != want {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}
	if !bs.Sent || len(bs.Outbox.Entries) != 2 || len(bs.Sessions) != 1 || bs.Sessions[0].HookAtMS != 5 ||
		bs.Message.Delivery != "pasted" || len(bs.Read.Entries) != 1 || bs.Read.Entries[0].Kind != "back" {
		t.Errorf("got %+v", bs)
	}

	// A copy with S' had its back posted: no BACK.
	run(t, r.Top, env, "git", "update-ref", RefBack+id, "HEAD")
	bs, got, err = start()
	if err != nil || bs.Sent || len(bs.Outbox.Entries) != 2 || got != "offload read --repo k --since 0\n" {
		t.Errorf("with S': %+v, %v; calls:\n%s", bs, err, got)
	}

	// With a bundle asked for, the copy's branches and S' follow the
	// answers, without what the haves it has reach (one it lacks does not
	// matter); this repository's clone, which has them, fetches it.
	laptop := filepath.Join(t.TempDir(), "laptop")
	run(t, dir, env, "git", "clone", "-q", r.Top, laptop)
	have := run(t, r.Top, env, "git", "rev-parse", "HEAD")
	run(t, r.Top, env, "git", "branch", "other")
	run(t, r.Top, env, "git", "commit", "-q", "--allow-empty", "-m", "box: more")
	run(t, r.Top, env, "git", "update-ref", RefBack+id, "HEAD")
	ask := &BundleAsk{Haves: []string{strings.Repeat("0", 40), have}, Path: filepath.Join(t.TempDir(), "back.bundle")}
	bs, err = a.BackStart(ctx, "k", id, r.Top, time.Minute, ask)
	if err != nil || !bs.Bundle || len(bs.Outbox.Entries) != 2 {
		t.Fatalf("with a bundle: %+v, %v", bs, err)
	}
	if out := run(t, laptop, env, "git", "bundle", "verify", ask.Path); !strings.Contains(out, "requires") && !strings.Contains(out, "okay") {
		t.Errorf("git bundle verify: %s", out)
	}
	if heads := run(t, laptop, env, "git", "bundle", "list-heads", ask.Path); !strings.Contains(heads, "refs/heads/main") || !strings.Contains(heads, RefBack+id) {
		t.Errorf("the bundle's heads: %s", heads)
	}
	if n := run(t, laptop, env, "sh", "-c", "git bundle verify "+ask.Path+" 2>&1 | grep -c "+have); n != "1" {
		t.Errorf("the bundle does not need %s, which the haves named", have)
	}
	run(t, laptop, env, "git", "fetch", "-q", ask.Path, "+refs/heads/*:"+RefBox+"*", "+"+RefBack+id+":"+RefBack+id)
	if got, want := run(t, laptop, env, "git", "rev-parse", RefBack+id), run(t, r.Top, env, "git", "rev-parse", "HEAD"); got != want {
		t.Errorf("S' fetched from the bundle is %s, want %s", got, want)
	}
	// The bundle leaves out the branch the haves reach; the list of the
	// copy's branches has it, so the laptop names it as the fetch would.
	if bs.Branches["refs/heads/other"] != have || bs.Branches["refs/heads/main"] == "" || len(bs.Branches) != 2 {
		t.Errorf("the copy's branches: %v", bs.Branches)
	}
	lr, err := OpenRepo(ctx, laptop, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := lr.boxBranches(ctx, bs.Branches); err != nil {
		t.Fatal(err)
	}
	if got := run(t, laptop, env, "git", "rev-parse", RefBox+"other"); got != have {
		t.Errorf("%sother is %s, want %s", RefBox, got, have)
	}
	run(t, r.Top, env, "git", "update-ref", "-d", RefBack+id)

	// A session with a fault: BACK goes, but the box does not wait for
	// it; the laptop weighs the fault first (Backer.waitBack).
	writeFiles(t, dir, map[string]string{"fault": ""})
	bs, got, err = start()
	if want := "offload read --repo k --since 0\noffload status --repo k\noffload send --repo k --back\n"; err != nil || got != want || !bs.Sent || bs.Read != nil || bs.Outbox.Fault == nil || bs.Outbox.Fault.Kind != "dialog" {
		t.Errorf("with a fault: %+v, %v; calls:\n%s\nwant:\n%s", bs, err, got, want)
	}
	os.Remove(filepath.Join(dir, "fault"))

	// BACK refused: no wait after it.
	writeFiles(t, dir, map[string]string{"refuse": ""})
	_, got, err = start()
	var ae *AgentError
	if !errors.As(err, &ae) || ae.Verb != "send" || !ae.Refused() || strings.Contains(got, "--wait") {
		t.Errorf("refused BACK: %v; calls:\n%s", err, got)
	}
}
