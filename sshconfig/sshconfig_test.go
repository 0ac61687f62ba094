package sshconfig

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var testOpts = Options{SSHPath: "/opt/cb/cocoonbox-ssh", KnownHosts: "/home/u/.local/state/cocoonbox/ssh_known_hosts"}

func TestWithWithout(t *testing.T) {
	block := Block(testOpts)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", block},
		{"globals only", "ServerAliveInterval 30\n", "ServerAliveInterval 30\n" + block},
		{"no final newline", "ServerAliveInterval 30", "ServerAliveInterval 30\n" + block},
		{"before the first Host", "A 1\nHost x\n  User y\n", "A 1\n" + block + "\nHost x\n  User y\n"},
		{"before Match", "  match all\n", block + "\n  match all\n"},
		{"Host=", "Host=x\n", block + "\nHost=x\n"},
		{"not a Host line", "Hostname x\n", "Hostname x\n" + block},
		{"crlf", "A 1\r\nHost x\r\n", "A 1\r\n" + strings.ReplaceAll(block, "\n", "\r\n") + "\r\nHost x\r\n"},
	} {
		f, err := Parse(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := f.With(block)
		if got != tc.want {
			t.Errorf("%s: With =\n%s\nwant\n%s", tc.name, got, tc.want)
			continue
		}
		// Rewriting finds the block and changes nothing; removing gives the
		// input back (a final newline added to it stays).
		f2, err := Parse(got)
		if err != nil || !f2.Has() || f2.With(block) != got {
			t.Errorf("%s: rewrite changed the file (%v)", tc.name, err)
		}
		in := tc.in
		if in != "" && !strings.HasSuffix(in, "\n") {
			in += "\n"
		}
		if back := f2.Without(); back != in {
			t.Errorf("%s: Without = %q, want %q", tc.name, back, in)
		}
	}
}

func TestRewriteInPlace(t *testing.T) {
	old := Block(Options{Suffix: ".box", SSHPath: "/old/cocoonbox-ssh", KnownHosts: "/k"})
	in := "A 1\nHost first\n  User a\n\n" + old + "Host last\n"
	f, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	got := f.With(Block(testOpts))
	if want := "A 1\nHost first\n  User a\n\n" + Block(testOpts) + "Host last\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestMarkerErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		line int
	}{
		{BeginMarker + "\n", 1},
		{"x\n" + EndMarker + "\n", 2},
		{BeginMarker + "\n" + BeginMarker + "\n" + EndMarker + "\n", 2},
		{BeginMarker + "\n" + EndMarker + "\n" + EndMarker + "\n", 3},
		{BeginMarker + "\n" + EndMarker + "\n" + BeginMarker + "\n" + EndMarker + "\n", 3},
	} {
		_, err := Parse(tc.in)
		me, ok := errors.AsType[*MarkerError](err)
		if !ok || me.Line != tc.line {
			t.Errorf("Parse(%q) = %v, want a MarkerError at line %d", tc.in, err, tc.line)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, o := range []Options{
		{Suffix: "cocoonbox", SSHPath: "/a", KnownHosts: "/b"},
		{Suffix: ".a b", SSHPath: "/a", KnownHosts: "/b"},
		{SSHPath: "relative/cocoonbox-ssh", KnownHosts: "/b"},
		{SSHPath: "/a\nProxyCommand evil", KnownHosts: "/b"},
		{SSHPath: "/a", KnownHosts: "/b\x00"},
	} {
		if o.Check() == nil {
			t.Errorf("Check(%+v) = nil, want an error", o)
		}
	}
	if err := testOpts.Check(); err != nil {
		t.Error(err)
	}
}

// TestBlockAsOpenSSHReadsIt reads the block back with the real ssh -G:
// every path, however quoted, comes back as written.
func TestBlockAsOpenSSHReadsIt(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatal("the OpenSSH client is needed (scripts/deps.sh installs it)")
	}
	o := Options{Suffix: ".box", SSHPath: `/opt/my tools/100%/it's/cocoonbox-ssh`, KnownHosts: `/home/a b/%d/"q"\x/known_hosts`}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfg, []byte("Host other\n  User nobody\n"+Block(o)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ssh", "-F", cfg, "-G", "main.box").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"user":                  "user",
		"userknownhostsfile":    o.KnownHosts,
		"hostkeyalias":          "cocoonbox",
		"stricthostkeychecking": "true",
		"proxycommand":          `'/opt/my tools/100%%/it'\''s/cocoonbox-ssh' --stdio --suffix .box %n`,
	}
	for _, l := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(l, " ")
		if w, ok := want[k]; ok {
			if v != w {
				t.Errorf("ssh -G: %s %q, want %q", k, v, w)
			}
			delete(want, k)
		}
	}
	for k := range want {
		t.Errorf("ssh -G printed no %s", k)
	}
	// The shell ssh runs the ProxyCommand with, after ssh's own %%, sees one
	// word: the path.
	cmd := strings.ReplaceAll(`'/opt/my tools/100%%/it'\''s/cocoonbox-ssh'`, "%%", "%")
	got, err := exec.Command("/bin/sh", "-c", "printf %s "+cmd).Output()
	if err != nil || string(got) != o.SSHPath {
		t.Errorf("the shell reads the ProxyCommand's path as %q (%v), want %q", got, err, o.SSHPath)
	}
}

func TestDiff(t *testing.T) {
	if d := Diff("f", "a\n", "a\n"); d != "" {
		t.Errorf("equal: %q", d)
	}
	old := "1\n2\n3\n4\n5\n6\n7\n8\n"
	new := "1\n2\n3\n4\nfive\n6\n7\n8\n"
	want := "--- f\n+++ f (new)\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
	if d := Diff("f", old, new); d != want {
		t.Errorf("got\n%s\nwant\n%s", d, want)
	}
	// As diff -u says it, checked against the real diff where there is one.
	if _, err := exec.LookPath("diff"); err == nil {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.WriteFile(a, []byte(old), 0o600)
		os.WriteFile(b, []byte(new), 0o600)
		out, _ := exec.Command("diff", "-u", a, b).Output()
		if body := strings.SplitN(string(out), "\n", 3)[2]; body != strings.SplitN(want, "\n", 3)[2] {
			t.Errorf("diff -u says\n%s", out)
		}
	}
	if d := Diff("f", "", "x\n"); d != "--- f\n+++ f (new)\n@@ -0,0 +1 @@\n+x\n" {
		t.Errorf("new file: %q", d)
	}
}
