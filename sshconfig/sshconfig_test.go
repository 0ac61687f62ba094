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
	crlf := strings.ReplaceAll(block, "\n", "\r\n")
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", block},
		{"globals only", "ServerAliveInterval 30\n", block + "\nServerAliveInterval 30\n"},
		{"no final newline", "ServerAliveInterval 30", block + "\nServerAliveInterval 30"},
		{"globals, Include and Host", "A 1\nInclude other\nHost x\n  User y\n", block + "\nA 1\nInclude other\nHost x\n  User y\n"},
		{"comment first", "# mine\nHost x\n", block + "\n# mine\nHost x\n"},
		{"empty line first", "\nHost x\n", block + "\n\nHost x\n"},
		{"crlf", "A 1\r\nHost x\r\n", crlf + "\r\nA 1\r\nHost x\r\n"},
		{"crlf, no final newline", "A 1\r\nHost x", crlf + "\r\nA 1\r\nHost x"},
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
		// input back byte for byte.
		f2, err := Parse(got)
		if err != nil || !f2.Has() || f2.With(block) != got {
			t.Errorf("%s: rewrite changed the file (%v)", tc.name, err)
		}
		if back := f2.Without(); back != tc.in {
			t.Errorf("%s: Without = %q, want %q", tc.name, back, tc.in)
		}
	}
}

// A block an older cocoonbox put before the first Host line (after the
// user's globals) or at the end moves to the top on a rewrite; one at the
// top, or after comments only, is rewritten in place.
func TestRewrite(t *testing.T) {
	old := strings.Replace(Block(Options{Suffix: ".box", SSHPath: "/old/cocoonbox-ssh", KnownHosts: "/k"}), "Host *\n", "", 1)
	for _, tc := range []struct{ name, in, want string }{
		{"old, before the first Host", "A 1\n" + old + "\nHost last\n", Block(testOpts) + "\nA 1\nHost last\n"},
		{"old, at the end", "A 1\n" + old, Block(testOpts) + "\nA 1\n"},
		{"old, alone", old, Block(testOpts)},
		{"at the top", old + "\nA 1\n", Block(testOpts) + "\nA 1\n"},
		{"after comments", "# mine\n\n" + old + "\nA 1\n", "# mine\n\n" + Block(testOpts) + "\nA 1\n"},
	} {
		f, err := Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.With(Block(testOpts)); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
		// Removed where it is, or after the move, the user's lines stay.
		f2, _ := Parse(tc.want)
		if a, b := f.Without(), f2.Without(); a != b {
			t.Errorf("%s: Without = %q in place, %q after the move", tc.name, a, b)
		}
	}
	f, _ := Parse("A 1\n" + old + "\nHost last\n")
	if got := f.Without(); got != "A 1\nHost last\n" {
		t.Errorf("old block removed: %q", got)
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
		{SSHPath: "/a", KnownHosts: "/home/${X}/known_hosts"},
	} {
		if o.Check() == nil {
			t.Errorf("Check(%+v) = nil, want an error", o)
		}
	}
	if err := testOpts.Check(); err != nil {
		t.Error(err)
	}
	if err := (Options{SSHPath: "/a", KnownHosts: "/h/${X}"}).Check(); !errors.Is(err, ErrEnvVar) {
		t.Errorf("${ in known_hosts: %v, want ErrEnvVar", err)
	}
	// What OpenSSH does not expand is written: $ without a brace, ~ past
	// the start, and anything in the ProxyCommand's path.
	if err := (Options{SSHPath: "/${X}/~/a", KnownHosts: "/h/$X/~/{}"}).Check(); err != nil {
		t.Error(err)
	}
}

// TestBlockAsOpenSSHReadsIt reads the block back with the real ssh -G:
// every path, however quoted, comes back as written.
func TestBlockAsOpenSSHReadsIt(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatal("the OpenSSH client is needed (scripts/deps.sh installs it)")
	}
	o := Options{Suffix: ".box", SSHPath: `/opt/my tools/100%/it's/${X}~/cocoonbox-ssh`, KnownHosts: `/home/a b/%d/"q"\x/$X~/known_hosts`}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfg, []byte("Host other\n  User nobody\n"+Block(o)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ssh", "-F", cfg, "-G", "main.box")
	cmd.Env = append(os.Environ(), "X=expanded")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"user":                  "user",
		"userknownhostsfile":    o.KnownHosts,
		"hostkeyalias":          "cocoonbox",
		"stricthostkeychecking": "true",
		"proxycommand":          `'/opt/my tools/100%%/it'\''s/${X}~/cocoonbox-ssh' --stdio --suffix .box %h`,
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
	line := strings.ReplaceAll(`'/opt/my tools/100%%/it'\''s/${X}~/cocoonbox-ssh'`, "%%", "%")
	got, err := exec.Command("/bin/sh", "-c", "X=expanded; printf %s "+line).Output()
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

// TestBlockWinsOverGlobals: OpenSSH takes the first value it reads, so
// the block must win over the user's global options and Includes written
// before any Host line, and leave the user's own Host blocks and globals
// to the other hosts (read back with the real ssh -G).
func TestBlockWinsOverGlobals(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatal("the OpenSSH client is needed (scripts/deps.sh installs it)")
	}
	dir := t.TempDir()
	inc := filepath.Join(dir, "included")
	if err := os.WriteFile(inc, []byte("Host *\n  HostKeyAlias included\n  IdentitiesOnly yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	user := "UserKnownHostsFile " + filepath.Join(dir, "users_known_hosts") + "\n" +
		"StrictHostKeyChecking accept-new\n" +
		"Include " + inc + "\n" +
		"ServerAliveInterval 17\n\n" +
		"Host other\n  User someone\n  Port 2222\n"
	f, err := Parse(user)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte(f.With(Block(testOpts))), 0o600); err != nil {
		t.Fatal(err)
	}
	g := func(host string) map[string]string {
		out, err := exec.Command("ssh", "-F", cfg, "-G", host).Output()
		if err != nil {
			t.Fatalf("ssh -G %s: %v", host, err)
		}
		m := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			k, v, _ := strings.Cut(l, " ")
			m[k] = v
		}
		return m
	}
	check := func(host string, want map[string]string) {
		t.Helper()
		got := g(host)
		for k, w := range want {
			if got[k] != w {
				t.Errorf("ssh -G %s: %s %q, want %q", host, k, got[k], w)
			}
		}
	}
	check("main.cocoonbox", map[string]string{
		"userknownhostsfile":    testOpts.KnownHosts,
		"stricthostkeychecking": "true",
		"hostkeyalias":          HostKeyAlias,
		"user":                  "user",
		"proxycommand":          "/opt/cb/cocoonbox-ssh --stdio %h",
		// What the block does not set stays the user's, global.
		"serveraliveinterval": "17",
	})
	check("other", map[string]string{
		"userknownhostsfile":    filepath.Join(dir, "users_known_hosts"),
		"stricthostkeychecking": "accept-new",
		"hostkeyalias":          "included",
		"user":                  "someone",
		"port":                  "2222",
		"identitiesonly":        "yes",
		"serveraliveinterval":   "17",
	})
	// Host patterns are case-sensitive, as OpenSSH matches them.
	check("MAIN.COCOONBOX", map[string]string{"hostkeyalias": "included", "userknownhostsfile": filepath.Join(dir, "users_known_hosts")})
}

// TestWindowsQuoting: for Windows the ProxyCommand's program is written
// as Win32-OpenSSH hands it to CreateProcessW: as it is, backslashes and
// all, and double-quoted when it holds a blank; % doubled all the same.
// POSIX single quotes, which CreateProcessW does not strip, never appear.
func TestWindowsQuoting(t *testing.T) {
	for path, want := range map[string]string{
		`C:\Users\me\bin\cocoonbox-ssh.exe`:            `  ProxyCommand C:\Users\me\bin\cocoonbox-ssh.exe --stdio %h`,
		`C:\Program Files\cocoonbox\cocoonbox-ssh.exe`: `  ProxyCommand "C:\Program Files\cocoonbox\cocoonbox-ssh.exe" --stdio %h`,
		`C:\Users\100%\it's here\cocoonbox-ssh.exe`:    `  ProxyCommand "C:\Users\100%%\it's here\cocoonbox-ssh.exe" --stdio %h`,
		`D:/tools/cocoonbox-ssh.exe`:                   `  ProxyCommand D:/tools/cocoonbox-ssh.exe --stdio %h`,
	} {
		o := Options{SSHPath: path, KnownHosts: `C:\Users\me\state\ssh_known_hosts`, GOOS: "windows"}
		if err := o.Check(); err != nil {
			t.Fatalf("Check(%q): %v", path, err)
		}
		b := Block(o)
		if !strings.Contains(b, "\n"+want+"\n") {
			t.Errorf("Block for %q:\n%s\nwant the line %q", path, b, want)
		}
		f, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if suffix, p, ok := f.Written("windows"); !ok || p != path || suffix != DefaultSuffix {
			t.Errorf("Written of the block for %q: %q, %q, %v", path, suffix, p, ok)
		}
	}
	if err := (Options{SSHPath: `C:\a"b\cocoonbox-ssh.exe`, KnownHosts: `C:\k`, GOOS: "windows"}).Check(); err == nil {
		t.Error(`Check accepted a Windows path with a double quote`)
	}
}

// TestWritten: a block reads back the suffix and path Block was given,
// however the path is quoted; a block of another form is not ok.
func TestWritten(t *testing.T) {
	for _, o := range []Options{
		{SSHPath: "/opt/cb/cocoonbox-ssh"},
		{Suffix: ".box", SSHPath: "/opt/my tools/100%/it's/cocoonbox-ssh"},
		{Suffix: ".dev.example", SSHPath: `/opt/back\slash/"q"/cocoonbox-ssh`},
	} {
		o.KnownHosts = "/k"
		f, err := Parse("# mine\n" + Block(o) + "Host x\n")
		if err != nil {
			t.Fatal(err)
		}
		if suffix, p, ok := f.Written(""); !ok || p != o.SSHPath || suffix != o.suffix() {
			t.Errorf("Written of %+v: %q, %q, %v", o, suffix, p, ok)
		}
	}
	for _, text := range []string{
		"Host x\n",
		BeginMarker + "\nHost *.cocoonbox\n  ProxyCommand nc %h %p\n" + EndMarker + "\n",
		BeginMarker + "\nHost *.cocoonbox\n  ProxyCommand '/unclosed --stdio %h\n" + EndMarker + "\n",
	} {
		f, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		if s, p, ok := f.Written(""); ok {
			t.Errorf("Written of %q: %q, %q, ok", text, s, p)
		}
	}
}

// TestCreated: the block of a file ssh-config created says so, and only
// that block; the rest of its lines and what Written reads are the same.
func TestCreated(t *testing.T) {
	o := testOpts
	o.Created = true
	created, plain := Block(o), Block(testOpts)
	for _, c := range []struct {
		text string
		want bool
	}{{created, true}, {plain, false}, {"Host x\n" + CreatedMarker + "\n", false}, {created + "Host x\n", true}} {
		f, err := Parse(c.text)
		if err != nil {
			t.Fatal(err)
		}
		if f.Created() != c.want {
			t.Errorf("Created() of %q is %v, want %v", c.text, f.Created(), c.want)
		}
	}
	if strings.Replace(created, CreatedMarker+"\n", "", 1) != plain {
		t.Errorf("the created block differs from the plain one beyond its marker:\n%s", created)
	}
	fc, _ := Parse(created)
	s, p, ok := fc.Written("linux")
	if !ok || s != DefaultSuffix || p != testOpts.SSHPath {
		t.Errorf("Written of the created block: %q %q %v", s, p, ok)
	}
}

// TestScan: Scan and Remove, which stream a file too large to hold, say
// what Parse says of it and give Without's bytes, whatever the line
// endings, a line longer than the scan's buffer before or after the
// block (or a marker's text inside one), and a block at the end with no
// final newline.
func TestScan(t *testing.T) {
	created := testOpts
	created.Created = true
	block, crlf := Block(testOpts), strings.ReplaceAll(Block(created), "\n", "\r\n")
	long := strings.Repeat("x", 3*scanBuffer+17)
	endless := strings.Repeat("# ", scanBuffer) + BeginMarker + "\n"
	for _, text := range []string{
		"",
		"A 1\n",
		block,
		block + "\nA 1\n",
		block + "\n\nA 1\n",
		crlf + "\r\nA 1\r\nHost x",
		"# mine\n\n" + block + "\nA 1\n",
		"A 1\n" + block,
		"A 1\n" + strings.TrimSuffix(block, "\n"),
		"Host " + long + "\n" + block + "\n" + long + "\nA 1\n",
		endless + block + "\n" + endless,
		long,
		BeginMarker + "\n",
		"x\n" + EndMarker + "\n",
		block + block,
		block + "\n" + EndMarker + "\n",
	} {
		f, perr := Parse(text)
		s, serr := Scan(strings.NewReader(text))
		if (perr == nil) != (serr == nil) || perr != nil && perr.Error() != serr.Error() {
			t.Errorf("Scan of %.60q: %v, Parse: %v", text, serr, perr)
			continue
		}
		if perr != nil {
			continue
		}
		if s.Has() != f.Has() || s.Created != f.Created() {
			t.Errorf("Scan of %.60q: %+v, Parse: has %v created %v", text, s, f.Has(), f.Created())
		}
		var out strings.Builder
		if err := s.Remove(&out, strings.NewReader(text)); err != nil {
			t.Fatal(err)
		}
		if out.String() != f.Without() {
			t.Errorf("Remove of %.60q = %.60q, want Without's %.60q", text, out.String(), f.Without())
		}
		var d strings.Builder
		if err := s.DiffRemove(&d, "f", strings.NewReader(text)); err != nil {
			t.Fatal(err)
		}
		if !f.Has() && d.Len() != 0 {
			t.Errorf("DiffRemove of a file without the block: %q", d.String())
		}
	}
}

// TestDiffRemove: the diff of a removal, checked against patch, which
// must turn the file into Remove's.
func TestDiffRemove(t *testing.T) {
	block := Block(testOpts)
	for _, text := range []string{"A 1\n" + block + "\nHost x\n", block + "\nA 1\n", "A 1\n" + strings.TrimSuffix(block, "\n")} {
		s, err := Scan(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		var d, want strings.Builder
		s.DiffRemove(&d, "f", strings.NewReader(text))
		s.Remove(&want, strings.NewReader(text))
		if !strings.HasPrefix(d.String(), "--- f\n+++ f (new)\n@@ -") {
			t.Errorf("diff of %q:\n%s", text, d.String())
		}
		if _, err := exec.LookPath("patch"); err != nil {
			continue
		}
		p := filepath.Join(t.TempDir(), "f")
		os.WriteFile(p, []byte(text), 0o600)
		cmd := exec.Command("patch", "-s", p)
		cmd.Stdin = strings.NewReader(d.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("patch of %q with\n%s: %v %s", text, d.String(), err, out)
			continue
		}
		if got, _ := os.ReadFile(p); string(got) != want.String() {
			t.Errorf("patched %q = %q, want %q", text, got, want.String())
		}
	}
}
