//go:build linux || darwin

package cli_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/cli"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// fakeLogin stands for `claude auth login` in the box: look-alike links
// first, then the vendor's, then a prompt for the code.
const fakeLogin = `#!/bin/sh
[ "$1 $2" = "auth login" ] || exit 9
printf 'Look-alikes: \033]8;;https://claude.ai.evil.com/x\033\\here\033]8;;\033\\ https://claude.ai@evil.com/ \033]8;;https://claude.ai/x|touch pwned\a.\033]8;;\a\r\n'
printf 'Open: https://claude.ai/oauth/authorize?code=true&state=abc|touch pwned\r\n'
printf 'Again: https://claude.ai/second\r\n'
printf 'Paste code here: '
read code
printf '\r\nLogin successful (%s)\r\n' "$code"
`

// TestSignIn runs offload sign-in on a terminal this test makes, against
// a local box served in process: only the first link on the vendor's
// hosts opens, once, as one argument; ~. disconnects with 255; the
// terminal's settings come back exactly.
func TestSignIn(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "box")
	srv := &localbox.Server{Dir: state}
	lis, url, err := localbox.Listen(state, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := localbox.IssueToken(state, "test", "cli")
	if err != nil {
		t.Fatal(err)
	}
	// The box is made before its home is written to, and before Serve.
	if err := srv.CreateBox("signin"); err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	boxHome := filepath.Join(state, "boxes", "signin", "home")
	write := func(p, s string, mode os.FileMode) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(boxHome, ".local", "bin", "claude"), fakeLogin, 0o755)
	write(filepath.Join(boxHome, ".profile"), "PATH=\"$HOME/.local/bin:$PATH\"\n", 0o644)
	opened := filepath.Join(dir, "opened")
	opener := filepath.Join(dir, "opener")
	write(opener, "#!/bin/sh\nprintf '%s\\n' \"$#\" \"$@\" >> "+opened+"\n", 0o755)
	vars := map[string]string{
		"HOME": dir, "COCOONBOX_ENDPOINT": url, "COCOONBOX_TOKEN": tok, "BROWSER": opener, "TERM": "xterm",
		"PATH": os.Getenv("PATH"),
	}
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	env := cli.Env{Getenv: func(k string) string { return vars[k] }, Environ: environ}

	signIn := func(input string) (int, string, string) {
		t.Helper()
		ptm, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptm.Close()
		defer tty.Close()
		go io.Copy(io.Discard, ptm)
		before, err := unix.IoctlGetTermios(int(tty.Fd()), tcgets)
		if err != nil {
			t.Fatal(err)
		}
		ptm.Write([]byte(input))
		var out, errb bytes.Buffer
		code := cli.Cocoonbox([]string{"offload", "sign-in", "--kind", "claude", "--box", "signin"}, env, cli.Streams{In: tty, Out: &out, Err: &errb})
		after, err := unix.IoctlGetTermios(int(tty.Fd()), tcgets)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("the terminal's settings were not restored (-before +after):\n%s", diff)
		}
		return code, out.String(), errb.String()
	}

	code, out, errs := signIn("code-1234\r")
	if code != 0 || !strings.Contains(out, "Login successful (code-1234)") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	if !strings.Contains(errs, "cocoonbox: opened https://claude.ai/oauth/authorize?code=true&state=abc in your browser (if none opened") ||
		!strings.Contains(errs, "the Claude Code login stays in box signin") {
		t.Errorf("stderr %q", errs)
	}
	b, err := os.ReadFile(opened)
	if err != nil || string(b) != "1\nhttps://claude.ai/oauth/authorize?code=true&state=abc\n" {
		t.Errorf("the opener got %q, %v; want the one link, once, as one argument", b, err)
	}
	if strings.Contains(out+errs, tok) {
		t.Error("the token was printed")
	}
	if _, err := os.Stat(filepath.Join(boxHome, "pwned")); err == nil {
		t.Error("a command in a link ran")
	}

	// An opener that fails (xdg-open(1)'s exit status 3, "no method
	// available", as it fails with no browser installed) is reported with
	// the link to open by hand; with no browser at all nothing is tried.
	failing := filepath.Join(dir, "failing-opener")
	write(failing, "#!/bin/sh\nexit 3\n", 0o755)
	vars["BROWSER"] = failing
	code, _, errs = signIn("code-5678\r")
	if code != 0 || !strings.Contains(errs, "cocoonbox: the browser opener failing-opener failed (exit status 3); open the link in a browser on any computer:\r\n  https://claude.ai/oauth/authorize?code=true&state=abc") ||
		strings.Contains(errs, "in your browser") {
		t.Errorf("failing opener: exit %d, stderr %q", code, errs)
	}
	delete(vars, "BROWSER")
	code, _, errs = signIn("code-9\r")
	if code != 0 || !strings.Contains(errs, "no browser here (no $DISPLAY or $BROWSER); open the link in a browser on any computer:\r\n  https://claude.ai/") {
		t.Errorf("no browser: exit %d, stderr %q", code, errs)
	}
	vars["BROWSER"] = opener

	os.Remove(opened)
	code, _, errs = signIn("~.")
	if code != 255 || !strings.Contains(errs, "disconnected") {
		t.Errorf("~.: exit %d, stderr %q", code, errs)
	}

	var errb bytes.Buffer
	code = cli.Cocoonbox([]string{"offload", "sign-in", "--kind", "claude"}, env, cli.Streams{In: strings.NewReader(""), Out: io.Discard, Err: &errb})
	if code != 3 || !strings.Contains(errb.String(), "sign-in needs a terminal") {
		t.Errorf("no terminal: exit %d, %q", code, errb.String())
	}
}

// TestSignInSignal runs offload sign-in as a user's terminal runs it (a
// PTY as its controlling terminal): the terminal is raw while the
// vendor's login runs in the box, and a SIGTERM then ends sign-in with
// 143 (128+15), the terminal's settings back exactly as they were.
func TestSignInSignal(t *testing.T) {
	t.Parallel()
	b := startBox(t, func(s *localbox.Server) {
		if err := s.CreateBox(localbox.DefaultBox); err != nil {
			t.Fatal(err)
		}
	})
	home := filepath.Join(filepath.Dir(b.Workspace), "home")
	for p, s := range map[string]string{
		".local/bin/claude": "#!/bin/sh\necho READY\nexec sleep 600\n",
		".profile":          "PATH=\"$HOME/.local/bin:$PATH\"\n",
	} {
		p = filepath.Join(home, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := startProgOnPTY(t, "cocoonbox", ttyEnv(b), "offload", "sign-in", "--kind", "claude")
	p.waitFor("READY")
	tio, err := unix.IoctlGetTermios(int(p.tty.Fd()), tcgets)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&(unix.ICANON|unix.ECHO) != 0 {
		t.Errorf("the terminal is not raw while the login runs: lflag %#x", tio.Lflag)
	}
	p.cmd.Process.Signal(unix.SIGTERM)
	p.wantExit(143)
	if !strings.Contains(string(p.out), "cocoonbox: sign-in ended: terminated") {
		t.Errorf("the terminal shows %q", p.out)
	}
}

// TestSignInKeyPrompt: on a terminal, sign-in --with-api-key asks for the
// key at a prompt that does not echo it; the box then refuses (no claude
// installed there) naming install-cli, exit 3; Ctrl-C at the prompt ends
// with 130. Each time the terminal's settings come back exactly.
func TestSignInKeyPrompt(t *testing.T) {
	t.Parallel()
	b := startBox(t, func(s *localbox.Server) {
		if err := s.CreateBox(localbox.DefaultBox); err != nil {
			t.Fatal(err)
		}
	})
	const key = "sk-ant-api03-typed-at-the-prompt"
	// atPrompt waits for the prompt and for the terminal to stop echoing.
	atPrompt := func(p *ptyRun) {
		p.waitFor("Claude Code API key for the box (input hidden): ")
		for i := 0; ; i++ {
			tio, err := unix.IoctlGetTermios(int(p.tty.Fd()), tcgets)
			if err != nil {
				t.Fatal(err)
			}
			if tio.Lflag&unix.ECHO == 0 {
				return
			}
			if i == 1000 {
				t.Fatal("the terminal still echoes at the prompt")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p := startProgOnPTY(t, "cocoonbox", ttyEnv(b), "offload", "sign-in", "--kind", "claude", "--with-api-key")
	atPrompt(p)
	p.write(key + "\r")
	p.wantExit(3)
	out := string(p.out)
	if strings.Contains(out, key) || strings.Contains(out, "typed-at") {
		t.Errorf("the key was echoed: %q", out)
	}
	if !strings.Contains(out, "cocoonbox: box main: claude is not installed in the box") ||
		!strings.Contains(out, "install Claude Code in the box first: cocoonbox offload install-cli --kind claude --box main") {
		t.Errorf("the terminal shows %q", out)
	}

	p = startProgOnPTY(t, "cocoonbox", ttyEnv(b), "offload", "sign-in", "--kind", "claude", "--with-api-key")
	atPrompt(p)
	p.write("sk-half\x03")
	p.wantExit(130)
}
