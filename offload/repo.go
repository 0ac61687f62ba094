package offload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
	"github.com/cocoonbox/cocoonbox/internal/printable"
)

// ErrNotRepo is returned by OpenRepo outside a git work tree, such as
// inside a git directory.
var ErrNotRepo = errors.New("not a git repository")

// Repo is a git work tree on the laptop, as offload sees it.
type Repo struct {
	// Top is the work tree's absolute top directory, symlinks resolved.
	Top string
	// GitDir is its git directory; CommonDir the one holding objects and
	// refs. They differ in a linked worktree.
	GitDir, CommonDir string
	// Linked is true for a linked worktree (.git is a file).
	Linked bool
	// Key names the repo in the offload directories of the laptop and the
	// box: the first 16 hex digits of sha256(Top).
	Key string
	// Name is the copy's directory name in the box workspace: Top's base
	// name with anything but [A-Za-z0-9._-] replaced by '-'.
	Name string

	git git
}

// OpenRepo finds the work tree that contains dir (git rev-parse
// --show-toplevel). environ is the laptop's environment for git. It
// returns ErrNotRepo outside a work tree, and an *Error with ExitRefused
// (ErrControlPath) for a dir, top or git directory whose path holds a
// control character.
func OpenRepo(ctx context.Context, dir string, environ []string) (*Repo, error) {
	if err := checkPath("the working directory", dir); err != nil {
		return nil, err
	}
	g := git{dir: dir, env: HostEnv(environ, false)}
	out, err := g.line(ctx, "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir")
	if err != nil {
		var ge *gitcmd.Error
		// Inside .git, or a bare repository: no work tree.
		if errors.As(err, &ge) && (strings.Contains(ge.Stderr, "not a git repository") || strings.Contains(ge.Stderr, "must be run in a work tree")) {
			return nil, ErrNotRepo
		}
		return nil, err
	}
	f := strings.Split(out, "\n")
	if len(f) > 3 {
		// A newline in a path git printed (dir's has none), which the
		// lines cannot place: the top's, asked alone, or a git directory's.
		if top, err := g.line(ctx, "rev-parse", "--show-toplevel"); err == nil {
			if err := checkPath("the repository's top", top); err != nil {
				return nil, err
			}
		}
		return nil, refused(fmt.Errorf("the repository's git directory %w (a newline), which offload cannot carry", ErrControlPath), movePath)
	}
	for i, p := range f {
		if err := checkPath([]string{"the repository's top", "its git directory", "its common git directory"}[i], p); err != nil {
			return nil, err
		}
	}
	if len(f) != 3 || f[0] == "" {
		// A bare repository, or the inside of .git.
		return nil, ErrNotRepo
	}
	top, err := filepath.EvalSymlinks(f[0])
	if err != nil {
		return nil, err
	}
	common := f[2]
	if !filepath.IsAbs(common) {
		common = filepath.Join(dir, common)
	}
	fi, err := os.Lstat(filepath.Join(top, ".git"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", top, err)
	}
	sum := sha256.Sum256([]byte(top))
	r := &Repo{
		Top:       top,
		GitDir:    f[1],
		CommonDir: filepath.Clean(common),
		Linked:    fi.Mode().IsRegular(),
		Key:       hex.EncodeToString(sum[:8]),
		Name:      copyName(filepath.Base(top)),
	}
	r.git = git{dir: top, env: g.env}
	return r, nil
}

// ErrControlPath is in OpenRepo's error for a path with a control
// character: a newline, a tab, ESC, any of C0, DEL and C1.
var ErrControlPath = errors.New("holds a control character")

// movePath is the way on from ErrControlPath.
var movePath = Step{"move the repository to a path without one (mv), then run the command there"}

// checkPath refuses a path p, what it is, that holds a control
// character: git rev-parse prints paths one a line, and no message,
// record or hand-over line could show it as it is (docs/offload.md
// "Files"). The path is shown with the character as '?'.
func checkPath(what, p string) error {
	i := strings.IndexFunc(p, unicode.IsControl)
	if i < 0 {
		return nil
	}
	r, _ := utf8.DecodeRuneInString(p[i:])
	name := fmt.Sprintf("U+%04X", r)
	switch r {
	case '\n':
		name = "a newline"
	case '\t':
		name = "a tab"
	case '\r':
		name = "a carriage return"
	case 0x1b:
		name = "ESC"
	}
	return refused(fmt.Errorf("%s %s %w (%s, shown as ?), which offload cannot carry", what, printable.Line(p, 0), ErrControlPath, name), movePath)
}

// copyName makes a directory name that needs no quoting in a remote shell.
func copyName(base string) string {
	b := []byte(base)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	name := strings.TrimLeft(string(b), ".-")
	if name == "" {
		return "repo"
	}
	return name
}
