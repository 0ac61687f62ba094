package offload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

func checks(fs []agentwire.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Outcome+" "+f.Check)
	}
	return out
}

func TestPreflight(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	port := lis.Addr().(*net.TCPAddr).Port
	listening := func(ctx context.Context) (map[int]bool, error) { return ListeningPorts(ctx, "linux") }

	tests := []struct {
		name     string
		files    map[string]string
		remote   string
		p        Preflight
		want     []string
		contains string
	}{
		{name: "clean", files: map[string]string{"main.go": "package main\n"}, p: Preflight{Listening: listening}},
		{
			name:     "ignored .env not opted in",
			files:    map[string]string{".gitignore": ".env*\n", ".env": "A=1\n", ".env.example": "A=\n"},
			want:     []string{"warn secrets"},
			contains: fmt.Sprintf(".env is git-ignored, so it stays on this laptop; opt in with: <verb %d file:.env>", VerbSecretsAdd),
		},
		{
			name:  "ignored .env opted in",
			files: map[string]string{".gitignore": ".env\n", ".env": "A=1\n"},
			p:     Preflight{Secrets: []string{"file:.env"}},
		},
		{
			name:     "a port in .env that listens here",
			files:    map[string]string{".env.local": fmt.Sprintf("DATABASE_URL=postgres://localhost:%d/db\n", port)},
			p:        Preflight{Listening: listening, Secrets: []string{"file:.env.local"}},
			want:     []string{"warn local_services"},
			contains: fmt.Sprintf("port %d (.env.local)", port),
		},
		{
			name:     "a PORT= in compose that listens here",
			files:    map[string]string{"docker-compose.yml": fmt.Sprintf("services:\n  db:\n    ports:\n      - \"%d:5432\"\n", port)},
			p:        Preflight{Listening: listening},
			want:     []string{"warn local_services"},
			contains: "docker-compose.yml",
		},
		{
			name:  "a port that does not listen",
			files: map[string]string{".env.example": "x", "config/app.toml": "port = 1\n"},
			p:     Preflight{Listening: listening},
		},
		{
			name:     "a remote at a private address",
			files:    map[string]string{"a": "a"},
			remote:   "ssh://git@10.20.30.40/repo.git",
			want:     []string{"warn vpn_hosts"},
			contains: "10.20.30.40",
		},
		{
			name:     "a host a split-DNS resolver serves",
			files:    map[string]string{"config.yaml": "url: https://git.corp.example/x\n"},
			p:        Preflight{SplitDNS: func(context.Context) []string { return []string{"corp.example"} }},
			want:     []string{"warn vpn_hosts"},
			contains: "git.corp.example",
		},
		{
			name:  "public and loopback hosts",
			files: map[string]string{"config.yaml": "a: https://192.0.2.1/x\nb: http://127.0.0.1:9/\n"},
			p:     Preflight{Resolve: func(context.Context, string) ([]net.IP, error) { t.Error("resolved a literal"); return nil, nil }},
		},
		{
			name:     "an Apple target",
			files:    map[string]string{"App.xcodeproj/project.pbxproj": "x", "Podfile": "x"},
			want:     []string{"warn macos_only"},
			contains: "App.xcodeproj",
		},
		{
			name:  "a Swift package for Linux too",
			files: map[string]string{"Package.swift": "let p = Package(name: \"x\", platforms: [.macOS(.v13), .linux])\n"},
		},
		{
			name:  "a Swift package for Apple only",
			files: map[string]string{"Package.swift": "let p = Package(\n  name: \"x\",\n  platforms: [.iOS(.v17), .macOS(.v14)]\n)\n"},
			want:  []string{"warn macos_only"},
		},
		{
			name:     "Commands need macOS",
			files:    map[string]string{"a": "a"},
			p:        Preflight{Handover: validHandover("- `xcodebuild -scheme App test`", "none")},
			want:     []string{"block macos_only"},
			contains: "xcodebuild",
		},
		{
			name:  "open as a word, not a command",
			files: map[string]string{"a": "a"},
			p:     Preflight{Handover: validHandover("make open-source-check\ngo test ./... # open issues", "none")},
		},
		{
			name:     "the hand-over needs secrets",
			files:    map[string]string{"a": "a"},
			p:        Preflight{Handover: validHandover("make", "Secrets needed: STRIPE_KEY")},
			want:     []string{"warn secrets"},
			contains: fmt.Sprintf("secrets are needed (STRIPE_KEY) and none is opted in; see: <verb %d >", VerbSecretsAdd),
		},
		{
			name:     "the hand-over needs secrets, in a list",
			files:    map[string]string{"a": "a"},
			p:        Preflight{Handover: validHandover("make", "- **Secrets needed:** DB_PASSWORD, API_KEY.")},
			want:     []string{"warn secrets"},
			contains: "secrets are needed (DB_PASSWORD, API_KEY) and",
		},
		{
			name:  "the template's hint is no need",
			files: map[string]string{"a": "a"},
			p:     Preflight{Handover: validHandover("make", templateHints[7])},
		},
		{
			name:  "the hand-over needs none",
			files: map[string]string{"a": "a"},
			p:     Preflight{Handover: validHandover("make", "Secrets needed: none")},
		},
		{
			name:     "the code reads a secret set here",
			files:    map[string]string{"main.go": "package main\nimport \"os\"\nvar k = os.Getenv(\"OPENAI_API_KEY\") + os.Getenv(\"HOME\") + os.Getenv(\"UNSET_TOKEN\")\n"},
			p:        Preflight{Environ: []string{"OPENAI_API_KEY=sk-do-not-print", "HOME=/h"}},
			want:     []string{"warn secrets"},
			contains: "OPENAI_API_KEY",
		},
		{
			name:     "docker compose ls fails",
			files:    map[string]string{"a": "a"},
			p:        Preflight{Docker: func(context.Context) ([]string, error) { return nil, errors.New("unknown flag: --format") }},
			want:     []string{"warn local_services"},
			contains: "docker compose ls failed, so running compose projects were not checked: unknown flag: --format",
		},
		{
			name:  "LFS and submodules",
			files: map[string]string{".gitattributes": "*.psd filter=lfs diff=lfs merge=lfs -text\n", ".gitmodules": "[submodule \"x\"]\n"},
			want:  []string{"warn lfs", "warn submodules"},
		},
		{
			name:     "over 500 MB",
			files:    map[string]string{"a": "a"},
			p:        Preflight{Size: func(context.Context) (int64, error) { return 600_000_000, nil }},
			want:     []string{"confirm size"},
			contains: "600 MB",
		},
		{
			name:  "over 500 MB, yes kept",
			files: map[string]string{"a": "a"},
			p:     Preflight{SizeOK: true, Size: func(context.Context) (int64, error) { t.Error("measured"); return 0, nil }},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			r := newRepo(t, env, tc.files)
			if tc.remote != "" {
				run(t, r.Top, env, "git", "remote", "add", "origin", tc.remote)
			}
			tc.p.Spell = spell
			fs := tc.p.Run(context.Background(), r)
			if diff := cmp.Diff(tc.want, checks(fs)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%+v", diff, fs)
			}
			all := fmt.Sprint(fs)
			if tc.contains != "" && !strings.Contains(all, tc.contains) {
				t.Errorf("no finding says %q: %s", tc.contains, all)
			}
			if strings.Contains(all, "sk-do-not-print") {
				t.Errorf("a secret's value is in a finding: %s", all)
			}
		})
	}
}

// spell shows a Command of a finding's fix by its verb and arguments.
func spell(c Command) string { return fmt.Sprintf("<verb %d %s>", c.Verb, strings.Join(c.Args, " ")) }

func TestCommandUsing(t *testing.T) {
	for line, want := range map[string]string{
		"xcodebuild -scheme X":          "xcodebuild",
		"$ xcrun simctl list":           "xcrun",
		"- `open App.xcworkspace`":      "open",
		"make && open build/index.html": "open",
		"FOO=1 security find-identity":  "security",
		"sudo launchctl load x.plist":   "launchctl",
		"/usr/bin/xcodebuild test":      "xcodebuild",
		"go test ./... # open issues":   "",
		"echo xcodebuild":               "",
		"make open":                     "",
	} {
		if got := commandUsing(line, appleCommands); got != want {
			t.Errorf("commandUsing(%q) = %q, want %q", line, got, want)
		}
	}
}
