package remote

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// Forms lists the accepted URL forms, for error messages and docs.
const Forms = "cocoonbox::BOX/PATH, cocoonbox::BOX:/ABS/PATH, cocoonbox::BOX:~/PATH or cocoonbox://BOX/PATH"

const (
	prefix = "cocoonbox::"
	scheme = "cocoonbox://"
)

// boxRE admits box names ([a-z0-9-]) and ids (box_ and hex), and a little
// more, so that the service rather than the grammar says which exist.
var boxRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`) })

// Repo is a repository in a box, as a cocoonbox URL names it.
type Repo struct {
	// Box is the box's name or id.
	Box string
	// Path is the repository's path as the service receives it: relative
	// to the box's workspace, "~" or "~/..." for the box user's home, or
	// absolute. A relative path that git would read as an option or a home
	// ("-x", "~x") is prefixed with "./". git's services themselves expand
	// the leading "~" and try the suffixes .git and /.git, as over ssh.
	Path string
}

// URLError is a malformed cocoonbox URL.
type URLError struct {
	// URL is the URL as the user wrote it.
	URL string
	// Reason says what is wrong with it.
	Reason string
}

func (e *URLError) Error() string {
	return fmt.Sprintf("bad URL %q: %s; use %s", e.URL, e.Reason, Forms)
}

// ParseURL parses the URL git hands its helper: the part after
// "cocoonbox::" (BOX/PATH, BOX:/ABS/PATH, BOX:~/PATH), or a whole
// cocoonbox:// URL, which takes the same three forms after the scheme. A
// leading "cocoonbox::" is accepted too, for a helper run by hand. Errors
// are *URLError.
func ParseURL(s string) (Repo, error) {
	shown := s
	rest := strings.TrimPrefix(s, prefix)
	if r, ok := strings.CutPrefix(rest, scheme); ok {
		rest = r
	} else if i := strings.Index(rest, "://"); i >= 0 {
		return Repo{}, &URLError{shown, fmt.Sprintf("the scheme %q is not cocoonbox", rest[:i])}
	} else if !strings.HasPrefix(s, prefix) {
		shown = prefix + s
	}
	bad := func(format string, args ...any) (Repo, error) {
		return Repo{}, &URLError{shown, fmt.Sprintf(format, args...)}
	}
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return bad("it contains the control character %q", rest[i])
	}
	i := strings.IndexAny(rest, "/:")
	if i < 0 {
		if rest == "" {
			return bad("no box name")
		}
		return bad("no repository path after the box name")
	}
	box, sep, path := rest[:i], rest[i], rest[i+1:]
	if box == "" {
		return bad("no box name")
	}
	if !boxRE().MatchString(box) {
		return bad("%q is not a box name or id", box)
	}
	switch {
	case sep == '/' && path == "":
		return bad("no repository path after the box name")
	case sep == '/':
		if strings.HasPrefix(path, "-") || strings.HasPrefix(path, "~") {
			path = "./" + path
		}
	case strings.HasPrefix(path, "/"), path == "~", strings.HasPrefix(path, "~/"):
	case strings.HasPrefix(path, "~"):
		return bad("only the box user's home (~/) can be named")
	default:
		return bad("after BOX: the path must start with / or ~/")
	}
	return Repo{Box: box, Path: path}, nil
}

// Command is the command line that runs service (such as git-upload-pack)
// on the repository, for the box user's POSIX shell: the path is one
// single-quoted word, so no URL can make the shell run anything else.
func (r Repo) Command(service string) string {
	return service + " " + quote(r.Path)
}

// InitCommand is the line, for a local POSIX shell, that creates the
// repository as a bare one with `cocoonbox rsh`, on branch main: a box's
// git may have no init.defaultBranch, and would make master.
func (r Repo) InitCommand() string {
	return "cocoonbox rsh " + r.Box + " git init --bare -b main " + localWord(remoteWord(r.Path))
}

// quote single-quotes s as git's sq_quote_buf does (! too, for csh-like
// shells): the box runs the line git itself would.
func quote(s string) string { return shellquote.Git(s) }

// plain reports whether s needs no quoting in a POSIX shell word.
func plain(s string) bool { return shellquote.Bare(s, "_./:@%+,=-") }

// remoteWord is path as one word for the box's shell, with a leading ~
// left unquoted so that the shell expands it (git init does not).
func remoteWord(path string) string {
	if path == "~" {
		return path
	}
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if rest == "" || plain(rest) {
			return path
		}
		return "~/" + quote(rest)
	}
	if plain(path) {
		return path
	}
	return quote(path)
}

// localWord is w as one word for the local shell, which hands it to rsh
// unchanged: bare when that is safe, else in double quotes when w has
// nothing they treat specially, else single-quoted.
func localWord(w string) string {
	if plain(w) {
		return w
	}
	if !strings.ContainsAny(w, "\"$`\\!") {
		return `"` + w + `"`
	}
	return quote(w)
}
