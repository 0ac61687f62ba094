package offload

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// remotePath is the copy's path for rsync and git over the shim. The
// copy is <workspace>/<name> (contract: /workspace/<name>) and the box
// runs commands in its workspace, so the name alone reaches it, also in a
// local box whose workspace is elsewhere; a dir not of that shape is used
// as begin answered it.
func remotePath(dir, name string) string {
	if dir == "" || path.Base(dir) == name {
		return name
	}
	return dir
}

// QuoteCommand quotes a program path as one word for rsync's -e and
// git's GIT_SSH_COMMAND, which both split on spaces and honour single
// quotes. A path holding a single quote cannot be said that way.
func QuoteCommand(p string) (string, error) {
	if strings.ContainsAny(p, "'\n") {
		return "", fmt.Errorf("the path %q cannot be passed to rsync and git; install cocoonbox-ssh elsewhere", p)
	}
	if strings.ContainsAny(p, " \t\"\\$`") {
		return "'" + p + "'", nil
	}
	return p, nil
}

// rsyncPattern turns a path relative to the top into an rsync exclude
// pattern anchored at the top. rsync reads a backslash as an escape only
// in a pattern with wildcards; a newline cannot be in a line, so it
// becomes the wildcard ? (which then turns on escaping).
func rsyncPattern(rel string) string {
	p := "/" + rel
	if !strings.ContainsAny(p, "*?[\n\r") {
		return p
	}
	var b strings.Builder
	for _, c := range p {
		switch c {
		case '*', '?', '[', '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case '\n', '\r':
			b.WriteByte('?')
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// writeExcludes writes rsync's --exclude-from file, every path anchored,
// atomically: rsync never reads half a list.
func writeExcludes(path string, rels []string) error {
	var b bytes.Buffer
	for _, r := range rels {
		b.WriteString(rsyncPattern(r))
		b.WriteByte('\n')
	}
	return atomicfile.WriteFile(path, b.Bytes(), 0o600)
}

// rsyncArgs are the contract's rsync arguments (contract "Offload, Mac
// side" 2): no --delete-excluded, so the box's own ignored files stay.
// git's lock files (index.lock, HEAD's, refs' and packed-refs' locks)
// stay here: one a laptop git holds would lock the box agent's git out.
// A plain exclude, which openrsync takes too.
func rsyncArgs(excludeFile string, linked bool) []string {
	args := []string{"-az", "--delete", "--exclude-from=" + excludeFile, "--exclude=/.git/objects/", "--exclude=/.git/**.lock"}
	if linked {
		args = append(args, "--exclude=/.git")
	}
	return args
}

// runRsync runs rsync and returns its error with its last stderr line.
func runRsync(ctx context.Context, env []string, args []string) (string, error) {
	var out, errb bytes.Buffer
	c := exec.CommandContext(ctx, "rsync", args...)
	c.Env = env
	c.Stdout = &out
	c.Stderr = &errb
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = strings.TrimSpace(msg[i+1:])
		}
		if msg == "" {
			msg = err.Error()
		}
		return out.String(), fmt.Errorf("rsync: %s", msg)
	}
	return out.String(), nil
}

var totalSizeRE = regexp.MustCompile(`(?m)^Total file size: ([\d,.]+) bytes`)

// measure returns the bytes rsync would send to an empty copy: a dry run
// into an empty directory with the same excludes. An rsync whose --stats
// says nothing we can read (openrsync) gives way to the sum of the work
// tree files' sizes, which is what the dry run counts but .git.
func (r *Repo) measure(ctx context.Context, env []string, excludes []string) (int64, error) {
	n, err := r.rsyncMeasure(ctx, env, excludes)
	if err != nil {
		return r.fileSizes(ctx)
	}
	return n, nil
}

// fileSizes sums the sizes of the files offload sends but .git's.
func (r *Repo) fileSizes(ctx context.Context) (int64, error) {
	files, err := r.worktreeFiles(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, f := range files {
		if fi, err := os.Lstat(filepath.Join(r.Top, filepath.FromSlash(f))); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n, nil
}

func (r *Repo) rsyncMeasure(ctx context.Context, env []string, excludes []string) (int64, error) {
	tmp, err := os.MkdirTemp("", "cocoonbox-size-*")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	ex := filepath.Join(tmp, "excludes")
	if err := writeExcludes(ex, excludes); err != nil {
		return 0, err
	}
	dest := filepath.Join(tmp, "dest")
	args := append(rsyncArgs(ex, r.Linked), "--dry-run", "--stats", "--no-human-readable", r.Top+"/", dest+"/")
	out, err := runRsync(ctx, env, args)
	if err != nil {
		return 0, err
	}
	m := totalSizeRE.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("rsync --stats printed no total size")
	}
	return strconv.ParseInt(strings.NewReplacer(",", "", ".", "").Replace(m[1]), 10, 64)
}

// stillIgnored keeps of the box copy's ignored directories (begin's
// ignored, relative to the copy, ending in /) those this repository
// ignores too and sends nothing under. Only those may stay out of rsync:
// a directory the laptop no longer ignores must be synced, or the copy
// keeps stale content where S has the laptop's.
func (r *Repo) stillIgnored(ctx context.Context, boxIgnored []string) ([]string, error) {
	var dirs []string
	for _, p := range boxIgnored {
		if p = strings.TrimPrefix(p, "/"); p != "" && !strings.Contains(p, "\n") {
			dirs = append(dirs, p)
		}
	}
	if len(dirs) == 0 {
		return nil, nil
	}
	out, err := r.git.run(ctx, strings.NewReader(strings.Join(dirs, "\x00")+"\x00"), "check-ignore", "-z", "--stdin")
	if err != nil && exitCode(err) != 1 { // 1: none is ignored
		return nil, err
	}
	ignored := nulList(out)
	if len(ignored) == 0 {
		return nil, nil
	}
	files, err := r.worktreeFiles(ctx)
	if err != nil {
		return nil, err
	}
	var keep []string
	for _, d := range ignored {
		dir := strings.TrimSuffix(d, "/") + "/"
		if !slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, dir) }) {
			keep = append(keep, d)
		}
	}
	return keep, nil
}
