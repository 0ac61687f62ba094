package remote

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url  string
		want Repo
	}{
		{"main/app", Repo{"main", "app"}},
		{"main/app.git", Repo{"main", "app.git"}},
		{"main/src/app", Repo{"main", "src/app"}},
		{"main/my repo", Repo{"main", "my repo"}},
		{"box_0123abcd/app", Repo{"box_0123abcd", "app"}},
		{"main:/srv/git/app.git", Repo{"main", "/srv/git/app.git"}},
		{"main:~/app", Repo{"main", "~/app"}},
		{"main:~", Repo{"main", "~"}},
		{"main/-x", Repo{"main", "./-x"}},
		{"main/~x", Repo{"main", "./~x"}},
		{"main/~/x", Repo{"main", "./~/x"}},
		{"main/x'; touch PWNED; '", Repo{"main", "x'; touch PWNED; '"}},
		{"main/a:b", Repo{"main", "a:b"}},
		{"cocoonbox://main/app", Repo{"main", "app"}},
		{"cocoonbox://main:/abs", Repo{"main", "/abs"}},
		{"cocoonbox://main:~/app", Repo{"main", "~/app"}},
		{"cocoonbox::main/app", Repo{"main", "app"}},
		{"cocoonbox::cocoonbox://main/app", Repo{"main", "app"}},
	}
	for _, tt := range tests {
		got, err := ParseURL(tt.url)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tt.url, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseURL(%q) (-want +got):\n%s", tt.url, diff)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	tests := []struct{ url, msg string }{
		{"", `bad URL "cocoonbox::": no box name`},
		{"main", `bad URL "cocoonbox::main": no repository path after the box name`},
		{"main/", `no repository path after the box name`},
		{"/app", `no box name`},
		{":/app", `no box name`},
		{"main:app", `after BOX: the path must start with / or ~/`},
		{"main:", `after BOX: the path must start with / or ~/`},
		{"main:~bob/app", `only the box user's home (~/) can be named`},
		{"ma in/app", `"ma in" is not a box name or id`},
		{"-main/app", `"-main" is not a box name or id`},
		{"user@main/app", `"user@main" is not a box name or id`},
		{"main/a\nb", `it contains the control character '\n'`},
		{"cocoonbox://", `bad URL "cocoonbox://": no box name`},
		{"cocoonbox://main", `bad URL "cocoonbox://main": no repository path`},
		{"ssh://main/app", `the scheme "ssh" is not cocoonbox`},
	}
	for _, tt := range tests {
		_, err := ParseURL(tt.url)
		var ue *URLError
		if !errors.As(err, &ue) {
			t.Errorf("ParseURL(%q) = %v, want a *URLError", tt.url, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.msg) || !strings.HasSuffix(msg, "; use "+Forms) || strings.Contains(msg, "\n") {
			t.Errorf("ParseURL(%q) error:\n%s\nwant one line with %q and the forms", tt.url, msg, tt.msg)
		}
	}
}

// sh runs line with the system's POSIX shell and returns its stdout.
func sh(t *testing.T, line string, env ...string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	return string(out)
}

var hostile = []string{
	"app",
	"my repo",
	"x'; touch PWNED; '",
	"$(touch PWNED)`touch PWNED`",
	`a"b\c$d!e`,
	"it's $HOME",
	"'",
	"!!",
	"*",
	"a\tb",
}

// The command line's path word is the path, however hostile, for a real shell.
func TestCommandQuoting(t *testing.T) {
	dir := t.TempDir()
	for _, p := range hostile {
		r := Repo{Box: "main", Path: p}
		line := r.Command("printf '%s\\n'")
		got := sh(t, "cd "+quote(dir)+" && "+line)
		if got != p+"\n" {
			t.Errorf("%s printed %q, want %q", line, got, p+"\n")
		}
	}
	if out := sh(t, "ls -A "+quote(dir)); out != "" {
		t.Errorf("the shell made files: %q", out)
	}
}

// InitCommand's path, through the local shell and then the box's, is the
// path, with ~ expanded by the box's shell only.
func TestInitCommand(t *testing.T) {
	paths := append([]string{"~", "~/app", "~/my repo", "~/it's", "/srv/my repo", "./-x"}, hostile...)
	for _, p := range paths {
		r := Repo{Box: "main", Path: p}
		line := r.InitCommand()
		word, ok := strings.CutPrefix(line, "cocoonbox rsh main git init --bare -b main ")
		if !ok {
			t.Fatalf("InitCommand() = %q", line)
		}
		// The local shell hands rsh one word, which rsh gives the box's shell.
		remote := sh(t, "printf %s "+word, "HOME=/local")
		if strings.Contains(remote, "/local") {
			t.Errorf("%q: the local shell expanded ~: %q", line, remote)
		}
		got := sh(t, "printf %s "+remote, "HOME=/box")
		want := p
		if rest, ok := strings.CutPrefix(p, "~"); ok {
			want = "/box" + rest
		}
		if got != want {
			t.Errorf("%q gives the box %q, want %q", line, got, want)
		}
	}
	if got := (Repo{Box: "main", Path: "app.git"}).InitCommand(); got != "cocoonbox rsh main git init --bare -b main app.git" {
		t.Errorf("plain path: %q", got)
	}
}
