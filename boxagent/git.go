package boxagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
	"github.com/cocoonbox/cocoonbox/internal/gitindex"
)

// git runs git in dir with the config's environment plus extra and the
// options of our own plumbing (internal/plumbing), feeding stdin, and
// returns its stdout. Its errors are *gitcmd.Error naming stderr's first
// line (FirstLine), as the box half's failures always have.
func (c *Config) git(dir string, stdin io.Reader, extra []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	env := append(append(append([]string{}, c.Environ...), "GIT_TERMINAL_PROMPT=0"), extra...)
	return gitcmd.Runner{Dir: dir, Env: env, FirstLine: true}.Output(ctx, stdin, args...)
}

func (c *Config) git1(dir string, args ...string) (string, error) {
	out, err := c.git(dir, nil, nil, args...)
	return strings.TrimSpace(out), err
}

var oidRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`) })

// bundleHeader is a git bundle's header (gitformat-bundle(5)).
type bundleHeader struct {
	Prereqs []string
	Refs    [][2]string // oid, refname
}

// readBundleHeader reads a v2 or v3 bundle's header from r and leaves r at
// the pack.
func readBundleHeader(r *bufio.Reader) (*bundleHeader, error) {
	sig, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("offload.bundle: no bundle signature")
	}
	if sig != "# v2 git bundle\n" && sig != "# v3 git bundle\n" {
		return nil, fmt.Errorf("offload.bundle: not a git bundle (v2 or v3)")
	}
	h := &bundleHeader{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("offload.bundle: the header is cut short")
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return h, nil
		}
		switch {
		case strings.HasPrefix(line, "@"): // v3 capability
		case strings.HasPrefix(line, "-"):
			oid, _, _ := strings.Cut(line[1:], " ")
			if !oidRE().MatchString(oid) {
				return nil, fmt.Errorf("offload.bundle: bad prerequisite line")
			}
			h.Prereqs = append(h.Prereqs, oid)
		default:
			oid, ref, ok := strings.Cut(line, " ")
			if !ok || !oidRE().MatchString(oid) || (ref != "HEAD" && !strings.HasPrefix(ref, "refs/")) || strings.ContainsAny(ref, " \t\x00") {
				return nil, fmt.Errorf("offload.bundle: bad ref line")
			}
			h.Refs = append(h.Refs, [2]string{oid, ref})
		}
	}
}

// indexBundle takes the bundle at path into the repository at dir: its
// pack through git index-pack --stdin --fix-thin, then its refs (HEAD
// aside). Never git bundle unbundle: refs that rsync brought already name
// objects only the bundle holds, and unbundle refuses its prerequisites as
// not connected.
func (c *Config) indexBundle(dir, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	h, err := readBundleHeader(br)
	if err != nil {
		return err
	}
	for _, d := range []string{"objects/pack", "objects/info"} {
		if err := os.MkdirAll(filepath.Join(dir, ".git", d), 0o755); err != nil {
			return err
		}
	}
	if _, err := c.git(dir, br, nil, "index-pack", "--stdin", "--fix-thin"); err != nil {
		return err
	}
	// Refs that already hold their value are left alone, so that their
	// files keep the mtimes rsync gave them and its next quick check sees
	// the laptop's changes.
	have, err := c.git1(dir, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return err
	}
	current := map[string]string{}
	for _, l := range strings.Split(have, "\n") {
		if oid, name, ok := strings.Cut(l, " "); ok {
			current[name] = oid
		}
	}
	var upd strings.Builder
	for _, r := range h.Refs {
		if r[1] == "HEAD" || current[r[1]] == r[0] {
			continue
		}
		if _, err := c.git1(dir, "check-ref-format", r[1]); err != nil {
			return fmt.Errorf("offload.bundle: bad ref name %q", r[1])
		}
		fmt.Fprintf(&upd, "update %s %s\n", r[1], r[0])
	}
	if upd.Len() > 0 {
		if _, err := c.git(dir, strings.NewReader(upd.String()), nil, "update-ref", "--stdin"); err != nil {
			return err
		}
	}
	return nil
}

// presentRefs is the repository's refs whose objects it has: rsync brings
// refs that name objects only a bundle can bring.
func (c *Config) presentRefs(dir string) (map[string]string, error) {
	refs := map[string]string{}
	out, err := c.git1(dir, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil || out == "" {
		return refs, err
	}
	var oids []string
	var names []string
	for _, l := range strings.Split(out, "\n") {
		oid, name, ok := strings.Cut(l, " ")
		if ok {
			oids = append(oids, oid)
			names = append(names, name)
		}
	}
	chk, err := c.git(dir, strings.NewReader(strings.Join(oids, "\n")+"\n"), nil, "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(chk), "\n")
	for i, l := range lines {
		if i < len(names) && !strings.HasSuffix(l, " missing") {
			refs[names[i]] = oids[i]
		}
	}
	return refs, nil
}

// ignoredDirs is the copy's git-ignored directories relative to it, as
// git ls-files -oi --exclude-standard --directory lists those ending in /.
func (c *Config) ignoredDirs(dir string) ([]string, error) {
	out, err := c.git(dir, nil, nil, "ls-files", "-oi", "--exclude-standard", "--directory")
	if err != nil {
		return nil, err
	}
	dirs := []string{}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, "/") {
			dirs = append(dirs, l)
		}
	}
	return dirs, nil
}

// snapshotTree is the tree of the work tree as git add -A sees it, made
// in a temporary index so the real one is untouched.
func (c *Config) snapshotTree(dir string) (string, error) {
	tmp, err := os.CreateTemp("", "cocoonbox-index-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := copyIndex(filepath.Join(dir, ".git", "index"), tmp.Name()); errors.Is(err, fs.ErrNotExist) {
		os.Remove(tmp.Name())
	} else if err != nil {
		return "", err
	}
	env := []string{"GIT_INDEX_FILE=" + tmp.Name()}
	if _, err := c.git(dir, nil, env, "add", "-A"); err != nil {
		return "", err
	}
	out, err := c.git(dir, nil, env, "write-tree")
	return strings.TrimSpace(out), err
}

// copyIndex copies the index at src to dst with src's mtime
// (gitindex.ReadBytes says why).
func copyIndex(src, dst string) error {
	b, mtime, err := gitindex.ReadBytes(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return err
	}
	return os.Chtimes(dst, mtime, mtime)
}

// checkEqualsS checks that the copy equals S: its snapshot's tree is
// S^{tree} and HEAD is S's parent (unborn when S has none).
func (c *Config) checkEqualsS(dir, s string) error {
	sTree, err := c.git1(dir, "rev-parse", "--verify", "-q", s+"^{tree}")
	if err != nil {
		return fmt.Errorf("S %s is not in the copy", short(s))
	}
	parent, _ := c.git1(dir, "rev-parse", "--verify", "-q", s+"^1^{commit}")
	head, _ := c.git1(dir, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	if head != parent {
		return fmt.Errorf("the copy's HEAD %s is not S's parent %s", short(head), short(parent))
	}
	tree, err := c.snapshotTree(dir)
	if err != nil {
		return err
	}
	if tree != sTree {
		changed, _ := c.git1(dir, "diff-tree", "-r", "--name-only", sTree, tree)
		first, _, _ := strings.Cut(changed, "\n")
		return fmt.Errorf("the copy's files differ from S %s (first: %s)", short(s), orNone(first))
	}
	return nil
}

// snapshotCommit makes a commit of the work tree as git add -A sees it,
// with HEAD (if any) as parent, and points ref at it.
func (c *Config) snapshotCommit(dir, ref, msg string) (string, error) {
	tree, err := c.snapshotTree(dir)
	if err != nil {
		return "", err
	}
	args := []string{"commit-tree", tree, "-m", msg}
	if head, err := c.git1(dir, "rev-parse", "--verify", "-q", "HEAD^{commit}"); err == nil && head != "" {
		args = append(args, "-p", head)
	}
	env := []string{
		"GIT_AUTHOR_NAME=cocoonbox offload", "GIT_AUTHOR_EMAIL=offload@cocoonbox.invalid",
		"GIT_COMMITTER_NAME=cocoonbox offload", "GIT_COMMITTER_EMAIL=offload@cocoonbox.invalid",
	}
	out, err := c.git(dir, nil, env, args...)
	if err != nil {
		return "", err
	}
	oid := strings.TrimSpace(out)
	if _, err := c.git1(dir, "update-ref", ref, oid); err != nil {
		return "", err
	}
	return oid, nil
}

// attachments gathers "Attached by the packer" for the first prompt.
func (c *Config) attachments(dir string, p *promptInput) {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		return
	}
	p.Branch, _ = c.git1(dir, "symbolic-ref", "--short", "-q", "HEAD")
	p.Status, _ = c.git1(dir, "status", "--short")
	if l, err := c.git1(dir, "log", "--oneline", "@{upstream}..HEAD"); err == nil {
		p.Log = l
	} else {
		p.Log, _ = c.git1(dir, "log", "--oneline", "-5")
	}
	if h, _ := c.git1(dir, "config", "--get-all", "credential.helper"); strings.Contains(h, "osxkeychain") {
		p.MacOnly = append(p.MacOnly, "credential.helper osxkeychain")
	}
	if h, _ := c.git1(dir, "config", "--get", "core.hooksPath"); filepath.IsAbs(h) {
		p.MacOnly = append(p.MacOnly, "core.hooksPath "+h)
	}
}

// dropFsmonitor unsets core.fsmonitor in the copy's own config, which
// rsync brought from the laptop: the laptop's file system monitor (a
// watchman hook, git's own daemon, a helper at a laptop path) watches the
// laptop, not the copy, and git 2.39 has no daemon of its own on Linux.
// The box CLI's git then scans the copy as git does without one. The
// user's other settings and the repository's hooks stay.
func (c *Config) dropFsmonitor(dir string) {
	if _, err := os.Stat(filepath.Join(dir, ".git", "config")); err != nil {
		return
	}
	// Exit 5: it was not set.
	c.git(dir, nil, nil, "config", "--local", "--unset-all", "core.fsmonitor")
}
