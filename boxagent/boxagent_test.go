package boxagent

import (
	"github.com/cocoonbox/cocoonbox/handover"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"

	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

type member struct {
	name string
	typ  byte
	body string
	fmt  tar.Format
}

func mktar(t *testing.T, ms ...member) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Typeflag: m.typ, Mode: 0o644, Size: int64(len(m.body)), Format: m.fmt}
		if m.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
			h.Linkname = "/etc/passwd"
		}
		if h.Format == 0 {
			h.Format = tar.FormatPAX
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			w.Write([]byte(m.body))
		}
	}
	w.Close()
	return b.Bytes()
}

func TestReadStream(t *testing.T) {
	long := "file:" + strings.Repeat("d/", 80) + ".env"
	tests := []struct {
		name    string
		members []member
		secrets []string
		refuse  string // "" when the stream is taken
	}{
		{"ustar", []member{{name: "handover.md", body: "h", fmt: tar.FormatUSTAR}, {name: "env.json", body: "{}", fmt: tar.FormatUSTAR}}, nil, ""},
		{"pax long secret path", []member{{name: "handover.md", body: "h"}, {name: "secrets/" + long, body: "s"}, {name: "secrets/aws", body: "a"}}, []string{long, "aws"}, ""},
		{"dotdot", []member{{name: "../x", body: "x"}}, nil, "is not a member of the send stream"},
		{"absolute", []member{{name: "/etc/x", body: "x"}}, nil, "is not a member of the send stream"},
		{"symlink", []member{{name: "handover.md", typ: tar.TypeSymlink}}, nil, "is a symlink"},
		{"hard link", []member{{name: "env.json", typ: tar.TypeLink}}, nil, "is a hard link"},
		{"char device", []member{{name: "handover.md", typ: tar.TypeChar}}, nil, "is a character device"},
		{"fifo", []member{{name: "index", typ: tar.TypeFifo}}, nil, "is a fifo"},
		{"gnu", []member{{name: "handover.md", body: "h", fmt: tar.FormatGNU}}, nil, "GNU format"},
		{"duplicate", []member{{name: "HEAD", body: "a"}, {name: "HEAD", body: "b"}}, nil, "appears twice"},
		{"secret out of repo", []member{{name: "secrets/file:../x", body: "s"}}, nil, "outside the repository"},
		{"secret into .git", []member{{name: "secrets/file:.git/config", body: "s"}}, nil, "outside the repository"},
		{"unknown secret", []member{{name: "secrets/netrc", body: "s"}}, nil, "is not a secret entry"},
		{"secret dir", []member{{name: "secrets/", typ: tar.TypeDir}}, nil, "is a directory"},
		{"handover too big", []member{{name: "handover.md", body: strings.Repeat("x", handover.Max+1)}}, nil, "over its limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			stage, secrets := filepath.Join(dir, "stage"), filepath.Join(dir, "secrets")
			os.Mkdir(stage, 0o700)
			st, err := readStream(bytes.NewReader(mktar(t, tt.members...)), stage, secrets)
			if tt.refuse != "" {
				var se *StreamError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.refuse) {
					t.Fatalf("err = %v, want a StreamError with %q", err, tt.refuse)
				}
				ents, _ := os.ReadDir(dir)
				for _, e := range ents {
					if e.Name() != "stage" && e.Name() != "secrets" {
						t.Errorf("%s written outside stage/ and secrets/", e.Name())
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.secrets, st.Secrets); diff != "" {
				t.Errorf("secrets (-want +got):\n%s", diff)
			}
			for _, s := range tt.secrets {
				fi, err := os.Stat(filepath.Join(secrets, secretFile(s)))
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("secret %s: %v %v, want a 0600 file", s, fi, err)
				}
			}
		})
	}
}

func TestReadStreamNotATar(t *testing.T) {
	for _, in := range []string{"short", strings.Repeat("garbage!", 200)} {
		_, err := readStream(strings.NewReader(in), t.TempDir(), t.TempDir())
		var se *StreamError
		if !errors.As(err, &se) {
			t.Errorf("%.10q: err = %v, want a StreamError", in, err)
		}
	}
}

func handoverText(drop ...string) string {
	var b strings.Builder
	b.WriteString("# Hand-over: test\n\n")
	for _, h := range handover.Headings {
		if !contains(drop, h) {
			b.WriteString(h + "\nnone\n\n")
		}
	}
	return b.String()
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestPresetCodex(t *testing.T) {
	const dir = "/workspace/app"
	tests := []struct{ name, in, want string }{
		{"no file", "", "[projects.\"/workspace/app\"]\ntrust_level = \"trusted\"\n"},
		{"others kept", "model = \"o3\"\n\n[projects.\"/x\"]\ntrust_level = \"untrusted\"\n",
			"model = \"o3\"\n\n[projects.\"/x\"]\ntrust_level = \"untrusted\"\n\n[projects.\"/workspace/app\"]\ntrust_level = \"trusted\"\n"},
		{"table there", "[projects.\"/workspace/app\"]\ntrust_level = \"untrusted\"\nnote = 1\n[other]\na = 1\n",
			"[projects.\"/workspace/app\"]\ntrust_level = \"trusted\"\nnote = 1\n[other]\na = 1\n"},
		{"table without the key", "[projects.\"/workspace/app\"]\nnote = 1\n",
			"[projects.\"/workspace/app\"]\nnote = 1\ntrust_level = \"trusted\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.toml")
			if tt.in != "" {
				os.WriteFile(p, []byte(tt.in), 0o600)
			}
			if err := writeTrust(agentwire.KindOf("codex"), p, dir, ""); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("config.toml (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPresetClaude(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".claude.json")
	os.WriteFile(p, []byte(`{"theme":"dark","projects":{"/x":{"allowedTools":["a"]}}}`), 0o600)
	if err := writeTrust(agentwire.KindOf("claude"), p, "/workspace/app", ""); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	for _, want := range []string{`"theme": "dark"`, `"allowedTools": [`, `"hasCompletedOnboarding": true`, `"/workspace/app": {`, `"hasTrustDialogAccepted": true`} {
		if !strings.Contains(string(got), want) {
			t.Errorf(".claude.json lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "customApiKeyResponses") {
		t.Errorf("no key, yet customApiKeyResponses was written:\n%s", got)
	}
	// A key in the box's environment is approved (its last 20 characters,
	// as claude's dialog records a Yes), once.
	for range 2 {
		if err := writeTrust(agentwire.KindOf("claude"), p, "/workspace/app", "point-key-0123456789"); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = os.ReadFile(p)
	var doc struct {
		R struct{ Approved, Rejected []string } `json:"customApiKeyResponses"`
	}
	if err := json.Unmarshal(got, &doc); err != nil || len(doc.R.Approved) != 1 || doc.R.Approved[0] != "point-key-0123456789" || doc.R.Rejected == nil {
		t.Errorf("customApiKeyResponses = %+v (%v):\n%s", doc.R, err, got)
	}
	os.WriteFile(p, []byte(`not json`), 0o600)
	if err := writeTrust(agentwire.KindOf("claude"), p, "/workspace/app", ""); err == nil {
		t.Error("a broken .claude.json was overwritten")
	}
	if b, _ := os.ReadFile(p); string(b) != "not json" {
		t.Errorf(".claude.json changed to %q", b)
	}
}

func TestReadBundleHeader(t *testing.T) {
	oid := strings.Repeat("a", 40)
	h, err := readBundleHeader(bufio.NewReader(strings.NewReader("# v3 git bundle\n@object-format=sha1\n-" + oid + " base\n" + oid + " refs/heads/main\n" + oid + " HEAD\n\nPACK")))
	if err != nil {
		t.Fatal(err)
	}
	want := &bundleHeader{Prereqs: []string{oid}, Refs: [][2]string{{oid, "refs/heads/main"}, {oid, "HEAD"}}}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"PACK", "# v2 git bundle\n" + oid + " main\n\n", "# v2 git bundle\nzz refs/heads/x\n\n", "# v2 git bundle\n"} {
		if _, err := readBundleHeader(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestNames(t *testing.T) {
	for _, k := range []string{"app", "my-app_2", strings.Repeat("a", 64)} {
		if !ValidRepoKey(k) {
			t.Errorf("ValidRepoKey(%q) = false", k)
		}
	}
	for _, k := range []string{"", "-a", "a.b", "a/b", "a:b", "..", strings.Repeat("a", 65)} {
		if ValidRepoKey(k) {
			t.Errorf("ValidRepoKey(%q) = true", k)
		}
	}
	for _, n := range []string{".", "..", ".git", "a/b", ""} {
		if ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
	if got := misePin("node-lts"); got != "MISE_NODE_LTS_VERSION" {
		t.Errorf("misePin = %q", got)
	}
	if got := filepath.Base(agentwire.KindOf("claude").TranscriptDir("/h", "/workspace/my.app")); got != "-workspace-my-app" {
		t.Errorf("claude's transcript dir = %q", got)
	}
	if got := shellquote.Quote("it's"); got != `'it'\''s'` {
		t.Errorf("shellquote.Quote = %s", got)
	}
}

func TestInboxWatchAndPost(t *testing.T) {
	dir := t.TempDir()
	run, err := os.MkdirTemp("", "cbrun")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	cfg := &Config{Home: filepath.Join(dir, "home"), Workspace: filepath.Join(dir, "ws"), RunDir: run, Shell: "/bin/sh", Environ: os.Environ()}
	os.MkdirAll(filepath.Join(cfg.Workspace, "app"), 0o755)
	if err := cfg.writeRecord(&record{Repo: "k1", Name: "app", Dir: filepath.Join(cfg.Workspace, "app"), CLI: "claude", OffloadID: "o1", Status: StatusStopped}); err != nil {
		t.Fatal(err)
	}
	ib := NewInbox(cfg)
	lis, err := ib.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ib.Serve(ctx, lis)

	conn, err := cfg.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte(`{"op":"watch"}` + "\n"))
	lines := bufio.NewScanner(conn)
	// The watcher is registered once the inbox has read the line; a post
	// before that would be missed, so post until a line comes.
	got := make(chan string, 1)
	go func() {
		if lines.Scan() {
			got <- lines.Text()
		}
	}()
	body := handoverText()
	var line string
	for line == "" {
		if _, err := cfg.call(Request{Op: "post", Repo: "k1", Kind: "progress", Body: body}); err != nil {
			t.Fatal(err)
		}
		select {
		case line = <-got:
		case <-time.After(50 * time.Millisecond):
		}
	}
	var w WatchLine
	if err := json.Unmarshal([]byte(line), &w); err != nil {
		t.Fatal(err)
	}
	if w.Repo != "k1" || w.Entry != "progress" || w.Seq < 1 || w.OffloadID != "o1" || strings.Contains(line, "Hand-over") {
		t.Errorf("watch line %s", line)
	}

	// Bad requests: an unknown op, a bad key, a bad hand-over, no JSON.
	for req, code := range map[string]string{
		`{"op":"frob","repo":"k1"}`:                                         "invalid",
		`{"op":"read","repo":"../x"}`:                                       "invalid",
		`{"op":"post","repo":"k1","kind":"back","body":"# Hand-over: x\n"}`: "invalid",
		`{"op":"send","repo":"k1","body":"hi"}`:                             "refused",
		`not json`:                                                          "invalid",
	} {
		c, err := cfg.dial()
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(req + "\n"))
		sc := bufio.NewScanner(c)
		sc.Scan()
		c.Close()
		var resp Response
		if err := json.Unmarshal(sc.Bytes(), &resp); err != nil || resp.OK || resp.Code != code {
			t.Errorf("%s: answer %s, want code %s", req, sc.Text(), code)
		}
	}
}
