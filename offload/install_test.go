package offload

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// fakeBox answers each line by its first word, as a box would; the
// outputs follow what curl 7.88 and npm 9 print for these failures.
type fakeBox struct {
	answers map[string]fakeAnswer
	ran     []string
}

type fakeAnswer struct {
	code           int
	stdout, stderr string
}

func (f *fakeBox) run(_ context.Context, line string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	f.ran = append(f.ran, line)
	word, _, _ := strings.Cut(line, " ")
	a, ok := f.answers[word]
	if !ok {
		return 127, nil
	}
	// stderr first, as the real Codex's warning came before its version.
	io.WriteString(stderr, a.stderr)
	io.WriteString(stdout, a.stdout)
	return a.code, nil
}

func TestInstaller(t *testing.T) {
	claude, _ := LookupKind("claude")
	codex, _ := LookupKind("codex")
	unreachable := fakeAnswer{code: 6, stderr: "curl: (6) Could not resolve host: claude.ai\n"}
	version := fakeAnswer{stdout: "2.1.197 (Claude Code)\n"}
	for _, tt := range []struct {
		name    string
		kind    agentwire.Kind
		answers map[string]fakeAnswer
		via     string
		err     string // in the error line
		next    string // in a next step
	}{
		{"installer", claude, map[string]fakeAnswer{"curl": {stdout: "echo installing\n"}, "bash": {}, "claude": version}, "installer", "", ""},
		// A failed download is never hidden behind bash's exit status.
		{"download fails", claude, map[string]fakeAnswer{"curl": {code: 22, stderr: "curl: (22) The requested URL returned error: 404\n"}, "bash": {}, "claude": version},
			"", "install-cli: download the installer failed: exit status 22: curl: (22) The requested URL returned error: 404", "check that the box reaches claude.ai"},
		{"installer fails", claude, map[string]fakeAnswer{"curl": {stdout: "exit 3\n"}, "bash": {code: 3, stderr: "Installation failed\n"}, "claude": version},
			"", "install-cli: run the installer failed: exit status 3: Installation failed", ""},
		{"unreachable, npm", claude, map[string]fakeAnswer{"curl": unreachable, "npm": {stdout: "added 2 packages\n"}, "claude": version}, "npm", "", ""},
		{"unreachable, npm TLS", claude, map[string]fakeAnswer{"curl": unreachable,
			"npm": {code: 1, stderr: "npm ERR! code SELF_SIGNED_CERT_IN_CHAIN\nnpm ERR! request to https://registry/ failed, reason: self-signed certificate in certificate chain\n"}},
			"", "install-cli: npm install @anthropic-ai/claude-code failed: exit status 1: npm ERR! code SELF_SIGNED_CERT_IN_CHAIN", "NODE_EXTRA_CA_CERTS"},
		// Codex 0.171.0's stderr with a box home under /tmp (met in the
		// README trial): its version is still stdout's line.
		{"codex warns", codex, map[string]fakeAnswer{"npm": {}, "codex": {stdout: "codex-cli 0.171.0\n", stderr: "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary dir \"/tmp\"\n"}}, "npm", "", ""},
		// The box image has neither curl nor npm: curl's 127 is no
		// download failure, and the step installs curl.
		{"no curl, npm", claude, map[string]fakeAnswer{"npm": {stdout: "added 2 packages\n"}, "claude": version}, "npm", "", ""},
		{"no curl, no npm", claude, map[string]fakeAnswer{},
			"", "install-cli: curl is not in the box, nor is npm (on its login PATH): Claude Code needs one of them", "install curl in the box: cocoonbox rsh main 'sudo apt-get update && sudo apt-get install -y curl', then run install-cli again"},
		{"no npm", codex, map[string]fakeAnswer{}, "", "install-cli: npm install @openai/codex failed: command not found",
			"npm is not on the box's login PATH: install Node.js and npm in the box: cocoonbox rsh main 'sudo apt-get update && sudo apt-get install -y nodejs npm', then run install-cli again"},
		{"not on PATH after", codex, map[string]fakeAnswer{"npm": {}}, "", "install-cli: check codex --version failed: command not found", "~/.profile"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeBox{answers: tt.answers}
			var log bytes.Buffer
			in := &Installer{Kind: tt.kind, Run: f.run, Box: "main", Log: &log}
			res, err := in.Install(context.Background())
			if tt.err == "" {
				want, _, _ := strings.Cut(tt.answers[tt.kind.Binary()].stdout, "\n")
				if err != nil || res.Via != tt.via || res.Version != want {
					t.Fatalf("Install = %+v, %v, want version %q; ran %q", res, err, want, f.ran)
				}
				return
			}
			e, ok := err.(*Error)
			if !ok || e.Code != ExitFailed || !strings.Contains(e.Error(), tt.err) || strings.Contains(e.Error(), "\n") {
				t.Fatalf("Install: %v, want exit 1 with %q in one line; ran %q", err, tt.err, f.ran)
			}
			var next []string
			for _, s := range e.Next {
				next = append(next, s.Text(testRender))
			}
			if tt.next != "" && !strings.Contains(strings.Join(next, "\n"), tt.next) {
				t.Errorf("next steps %q lack %q", next, tt.next)
			}
		})
	}
}

// The installers' output goes to Output, one line per step to Log, and a
// failed npm's error lines to Log too with EchoErrors, but its pointer to
// its log file. npm's EEXIST (testdata/npm/eexist.txt, npm 11.19.1's real
// output for a link in the way of a package's bin: a symlink at
// P/bin/claude, then `npm install -g --prefix P ./pkg.tgz`) is one line
// naming what is there, then --force and rm; Force gives npm --force.
func TestInstallerOutput(t *testing.T) {
	claude, _ := LookupKind("claude")
	codex, _ := LookupKind("codex")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "npm", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	notices := read("force.txt") + "npm notice New major version of npm available! 10.8.2 -> 11.19.1\n"

	// Success: notices and warnings in Output only.
	f := &fakeBox{answers: map[string]fakeAnswer{"npm": {stdout: "\nadded 1 package in 293ms\n", stderr: notices}, "codex": {stdout: "codex-cli 0.171.0\n"}}}
	var log, out bytes.Buffer
	in := &Installer{Kind: codex, Run: f.run, Log: &log, Output: &out, EchoErrors: true}
	if _, err := in.Install(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "npm notice") || strings.Contains(log.String(), "npm warn") {
		t.Errorf("Log has npm's notices: %q", log.String())
	}
	if !strings.Contains(out.String(), "npm notice New major version") || !strings.Contains(out.String(), "npm warn install-scripts") {
		t.Errorf("Output lacks npm's notices: %q", out.String())
	}
	if strings.Contains(strings.Join(f.ran, "\n"), "--force") {
		t.Errorf("npm ran with --force unasked: %q", f.ran)
	}

	// A failure: npm's error lines in Log, not its log file's.
	log.Reset()
	f = &fakeBox{answers: map[string]fakeAnswer{"npm": {code: 1, stderr: read("self-signed.txt")}}}
	in = &Installer{Kind: codex, Run: f.run, Log: &log, Output: io.Discard, EchoErrors: true}
	if _, err := in.Install(context.Background()); err == nil {
		t.Fatal("Install succeeded")
	}
	if !strings.Contains(log.String(), "npm error code DEPTH_ZERO_SELF_SIGNED_CERT\nnpm error errno") || strings.Contains(log.String(), "complete log") {
		t.Errorf("Log: %q; want npm's error lines but its log's", log.String())
	}

	// EEXIST: what is there, in one line; --force and rm next.
	f = &fakeBox{answers: map[string]fakeAnswer{"curl": {code: 6}, "npm": {code: 1, stderr: read("eexist.txt")}, "if": {stdout: "a link to /opt/claude/versions/2.1.197\n"}}}
	in = &Installer{Kind: claude, Run: f.run, Box: "main"}
	_, err := in.Install(context.Background())
	e, ok := err.(*Error)
	want := "install-cli: npm install @anthropic-ai/claude-code failed: /tmp/npmx/prefix/bin/claude is already there (a link to /opt/claude/versions/2.1.197), and npm does not replace what it did not install; replace it with --force, or remove it"
	if !ok || e.Code != ExitFailed || e.Error() != want {
		t.Fatalf("Install: %v\nwant %s", err, want)
	}
	if got := nextText(e.Next...); !strings.Contains(got, "Force:true") || !strings.Contains(got, "Args:[rm /tmp/npmx/prefix/bin/claude]") {
		t.Errorf("next steps %s; want --force and rm", got)
	}
	if !strings.Contains(f.ran[len(f.ran)-1], "readlink /tmp/npmx/prefix/bin/claude") {
		t.Errorf("the probe: %q", f.ran[len(f.ran)-1])
	}

	// Force: npm --force.
	f = &fakeBox{answers: map[string]fakeAnswer{"npm": {}, "codex": {stdout: "codex-cli 0.171.0\n"}}}
	in = &Installer{Kind: codex, Run: f.run, Force: true}
	if _, err := in.Install(context.Background()); err != nil || !strings.Contains(f.ran[0], `npm install -g --prefix "$HOME/.local" --force @openai/codex`) {
		t.Errorf("Force: %v, ran %q", err, f.ran)
	}
}

// npmLine picks npm's telling line, never its log file's. The files in
// testdata/npm are npm 11.19.1's real output on Debian 12 for
// `npm install -g --prefix P --registry URL left-pad`: self-signed.txt
// against a local TLS server with a self-signed certificate
// (openssl s_server), refused.txt against a closed port.
func TestNPMLine(t *testing.T) {
	for _, tt := range []struct{ file, out, want string }{
		{file: "self-signed.txt", want: "npm error code DEPTH_ZERO_SELF_SIGNED_CERT"},
		{file: "refused.txt", want: "npm error code ECONNREFUSED"},
		{out: "npm ERR! code SELF_SIGNED_CERT_IN_CHAIN\nnpm ERR! request to https://registry/ failed\n\nnpm ERR! A complete log of this run can be found in:\nnpm ERR!     /root/.npm/_logs/2024-01-01T00_00_00_000Z-debug-0.log\n",
			want: "npm ERR! code SELF_SIGNED_CERT_IN_CHAIN"},
		{out: "npm error something odd\nnpm error A complete log of this run can be found in: /root/.npm/_logs/x-debug-0.log\n", want: "npm error something odd"},
	} {
		out := tt.out
		if tt.file != "" {
			b, err := os.ReadFile(filepath.Join("testdata", "npm", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			out = string(b)
		}
		if got := npmLine(out); got != tt.want {
			t.Errorf("%s: npmLine = %q, want %q", tt.file, got, tt.want)
		}
	}
}
