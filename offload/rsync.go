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
	"time"

	"github.com/cocoonbox/cocoonbox/box"
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

// The laptop rsyncs offload knows, told apart by `rsync --version`
// (fixtures: offload/testdata/rsync-version).
const (
	// Rsync3 is rsync 3.x (Homebrew's, a Linux distribution's).
	Rsync3 = "rsync 3"
	// Rsync269 is Apple's rsync 2.6.9, /usr/bin/rsync before macOS 15.4.
	Rsync269 = "rsync 2.6.9"
	// AppleOpenrsync is Apple's openrsync, /usr/bin/rsync from macOS
	// 15.4 on: protocol 29, "rsync version 2.6.9 compatible".
	AppleOpenrsync = "Apple openrsync"
	// PortableOpenrsync is OpenBSD's portable openrsync (protocol 27),
	// whose --checksum breaks the by-content pass of .git; refused.
	PortableOpenrsync = "portable openrsync"
)

// Rsync is the laptop's rsync: where it is and which it is.
type Rsync struct {
	// Path is the program run, as found on PATH.
	Path string
	// Variant is one of Rsync3, Rsync269, AppleOpenrsync.
	Variant string
	// Version is the rsync version its --version names ("3.2.7",
	// "2.6.9"); for openrsync the version it says it is compatible with.
	Version string
	// Protocol is the highest rsync protocol it speaks.
	Protocol int
	// Checksums and Compressions are the algorithms its --version lists
	// (rsync 3.2 on), strongest first, as it offers them to its peer;
	// nil when it lists none.
	Checksums, Compressions []string
}

// rsyncLists reads the checksum and compression lists of an `rsync
// --version` (rsync 3.2 on): the words under "Checksum list:" and
// "Compress list:", less the aliases in parentheses ("xxh64
// (xxhash)").
func rsyncLists(out string) (checksums, compressions []string) {
	var cur *[]string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "Checksum list:"):
			cur = &checksums
		case strings.HasPrefix(l, "Compress list:"):
			cur = &compressions
		case cur != nil && strings.HasPrefix(l, " "):
			for _, w := range strings.Fields(l) {
				if !strings.HasPrefix(w, "(") {
					*cur = append(*cur, w)
				}
			}
		default:
			cur = nil
		}
	}
	return checksums, compressions
}

// choices are the --checksum-choice (and with -z --compress-choice) that
// the two rsyncs of a transfer would agree on, given the box's `rsync
// --version` (boxVersion): each side takes its own most preferred
// algorithm that the other lists, both listing strongest first, so the
// laptop's first that the box lists. Named up front, rsync 3.2 does not
// negotiate them, one round trip at the start of each pass. nil when
// either side lists none (the box's or the laptop's rsync is older, or
// its --version was not read), or they share none but "none": rsync
// negotiates then as it would.
func (r *Rsync) choices(boxVersion string, compress bool) []string {
	boxSums, boxZips := rsyncLists(boxVersion)
	pick := func(mine, theirs []string) string {
		for _, m := range mine {
			if m != "none" && slices.Contains(theirs, m) {
				return m
			}
		}
		return ""
	}
	sum := pick(r.Checksums, boxSums)
	if sum == "" {
		return nil
	}
	args := []string{"--checksum-choice=" + sum}
	if compress {
		zip := pick(r.Compressions, boxZips)
		if zip == "" {
			return nil
		}
		args = append(args, "--compress-choice="+zip)
	}
	return args
}

var (
	sambaVersionRE = regexp.MustCompile(`^rsync\s+version\s+v?(\d+)\.(\d+)(?:\.(\d+))?\S*\s+protocol version (\d+)`)
	openrsyncRE    = regexp.MustCompile(`^openrsync: protocol version (\d+)`)
	compatibleRE   = regexp.MustCompile(`(?m)^rsync version (\S+) compatible`)
)

// brewRsync is the fix named when the laptop's rsync cannot do the job.
const brewRsync = "install rsync 3 (brew install rsync on a Mac) or put Apple's /usr/bin/rsync first on PATH"

// ParseRsyncVersion tells which rsync printed out, the output of
// `rsync --version` (stdout and stderr: portable openrsync prints on
// stderr). An rsync offload cannot use is an error naming the fix.
func ParseRsyncVersion(out string) (*Rsync, error) {
	out = strings.TrimLeft(out, " \t\r\n")
	first, _, _ := strings.Cut(out, "\n")
	first = strings.TrimSpace(first)
	if m := sambaVersionRE.FindStringSubmatch(first); m != nil {
		major, _ := strconv.Atoi(m[1])
		proto, _ := strconv.Atoi(m[4])
		v := &Rsync{Version: m[1] + "." + m[2], Protocol: proto}
		v.Checksums, v.Compressions = rsyncLists(out)
		if m[3] != "" {
			v.Version += "." + m[3]
		}
		switch {
		case major >= 3:
			v.Variant = Rsync3
		case proto >= 29:
			v.Variant = Rsync269
		default:
			return nil, fmt.Errorf("rsync %s speaks protocol %d, and offload needs 29 or later: %s", v.Version, proto, brewRsync)
		}
		return v, nil
	}
	if m := openrsyncRE.FindStringSubmatch(first); m != nil {
		proto, _ := strconv.Atoi(m[1])
		c := compatibleRE.FindStringSubmatch(out)
		if c == nil || proto < 29 {
			return nil, fmt.Errorf("this rsync is OpenBSD's portable openrsync (protocol %d), whose --checksum offload cannot use: %s", proto, brewRsync)
		}
		return &Rsync{Variant: AppleOpenrsync, Version: c[1], Protocol: proto}, nil
	}
	if first == "" {
		return nil, fmt.Errorf("rsync --version printed nothing, so offload cannot tell which rsync it is: %s", brewRsync)
	}
	return nil, fmt.Errorf("offload cannot tell which rsync this is from its --version (%q): %s", first, brewRsync)
}

// FindRsync finds rsync on PATH and tells which it is from its
// --version, run with env. None on PATH is an error wrapping
// exec.ErrNotFound; one offload cannot use is an error naming the fix.
func FindRsync(ctx context.Context, env []string) (*Rsync, error) {
	p, err := exec.LookPath("rsync")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, p, "--version")
	c.Env = env
	out, err := c.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --version failed (%v): %s", p, err, brewRsync)
	}
	r, err := ParseRsyncVersion(string(out))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	r.Path = p
	return r, nil
}

// openrsync says whether r is an openrsync.
func (r *Rsync) openrsync() bool { return r.Variant == AppleOpenrsync }

// syncArgs are the contract's rsync arguments (contract "Offload, Mac
// side" 2), which every variant takes: no --delete-excluded, so the
// box's own ignored files stay. git's lock files (index.lock, HEAD's,
// refs' and packed-refs' locks) stay here: one a laptop git holds would
// lock the box agent's git out.
func (r *Rsync) syncArgs(excludeFile string, o syncOpts) []string {
	a := "-a"
	if o.compress {
		a = "-az"
	}
	args := append(append([]string{a}, r.wholeList()...), o.choices...)
	args = append(args, "--delete", "--exclude-from="+excludeFile)
	switch {
	case o.objects:
		// .git/objects as it is, less git's temporary files; the rest of
		// .git is the second pass's (gitArgs). The rules match in order:
		// the first that matches a name decides.
		return append(args, "--exclude=/.git/objects/**/tmp_*", "--exclude=/.git/objects/incoming-*",
			"--include=/.git/", "--include=/.git/objects/", "--include=/.git/objects/**", "--exclude=/.git/*")
	case o.noGit:
		return append(args, "--exclude=/.git")
	}
	return append(args, "--exclude=/.git/objects/", "--exclude=/.git/**.lock")
}

// syncOpts are the choices of the first rsync pass (syncArgs).
type syncOpts struct {
	// compress is -z, which costs CPU for nothing when the box is on this
	// machine (a unix socket or loopback endpoint).
	compress bool
	// noGit leaves .git out: a linked worktree's .git file, or a .git
	// directory that the second pass sends, beside this one.
	noGit bool
	// objects, with noGit, sends .git/objects all the same (a first
	// offload: the packs as they are, so the box indexes nothing), less
	// git's temporary files there.
	objects bool
	// choices are both passes' algorithms, agreed up front (choices).
	choices []string
}

// gitArgs are the arguments of the second pass, of .git (no objects, no
// locks) given as <top>/.git into the copy, which compares by content:
// rsync's quick check (size and mtime) skips a ref rewritten in the same
// second at the same size. --checksum where it works; openrsync sends
// every file again (-I, through its delta transfer), as its --checksum
// cannot be trusted. It runs beside the first pass (syncOpts.noGit), so
// it deletes in .git what this repository no longer has; the box's
// objects and locks stay, as excluded. choices are the first pass's.
func (r *Rsync) gitArgs(choices []string) []string {
	cmp := "--checksum"
	if r.openrsync() {
		cmp = "-I"
	}
	args := append(append([]string{"-a"}, r.wholeList()...), choices...)
	return append(args, cmp, "--delete", "--exclude=/.git/objects/", "--exclude=**.lock")
}

// wholeList is rsync 3's --no-inc-recursive: the file list goes whole,
// up front. Its incremental recursion (the default from protocol 30)
// sends the list a directory at a time, each part once the box has
// gone through what came before: for the Go tree's 1,324 directories a
// pass that changes nothing took 1.8 s at 100 ms with it, 0.67 s without
// (0.20 and 0.23 s at 0 ms), 11 round trips fewer. The other variants
// speak protocol 29, which has no incremental recursion, and do not
// know the option.
func (r *Rsync) wholeList() []string {
	if r.Variant == Rsync3 {
		return []string{"--no-inc-recursive"}
	}
	return nil
}

// measureArgs are the size dry run's arguments after syncArgs, or nil
// when r's --stats prints no total in bytes (openrsync), and the files
// are summed instead. --no-human-readable is rsync 3's: 2.6.9 prints
// plain numbers and knows no such option.
func (r *Rsync) measureArgs() []string {
	switch r.Variant {
	case Rsync3:
		return []string{"--dry-run", "--stats", "--no-human-readable"}
	case Rsync269:
		return []string{"--dry-run", "--stats"}
	}
	return nil
}

// run runs r and returns its error with its last stderr line; prep, when
// set, adjusts the command before it starts.
func (r *Rsync) run(ctx context.Context, prep func(*exec.Cmd), env []string, args []string) (string, error) {
	var out, errb bytes.Buffer
	c := exec.CommandContext(ctx, r.Path, args...)
	c.Env = env
	if prep != nil {
		prep(c)
	}
	c.Stdout = &out
	c.Stderr = &errb
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = strings.TrimSpace(msg[i+1:])
		}
		if l := shimLine(args, errb.String()); l != "" {
			// The remote shell failed: its own last line says why (a lost
			// connection), where rsync's says "unexplained error (code
			// 255)", "connection unexpectedly closed" or, when it saw the
			// pipe end before the shell's exit, "error in socket IO (code
			// 10)".
			msg = l
		}
		if msg == "" {
			msg = err.Error()
		}
		return out.String(), fmt.Errorf("rsync: %s", msg)
	}
	return out.String(), nil
}

// shimLine is shellLine for the remote shell of args (its -e, as
// QuoteCommand made it); "" if args name none.
func shimLine(args []string, stderr string) string {
	i := slices.Index(args, "-e")
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return shellLine(args[i+1], stderr)
}

// shellLine is the last line of stderr that the remote shell shell (a
// command as QuoteCommand made it) wrote, by its "NAME: " prefix, when
// that line says why it failed: "" if it wrote none, or if its last is a
// resumable session's notice on its way (box.IsNotice), which a command
// that failed in the box may follow.
func shellLine(shell, stderr string) string {
	prefix := path.Base(strings.Trim(filepath.ToSlash(shell), "'")) + ": "
	last := ""
	for _, l := range strings.Split(stderr, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, prefix) {
			last = l
		}
	}
	if box.IsNotice(strings.TrimPrefix(last, prefix)) {
		return ""
	}
	return last
}

var totalSizeRE = regexp.MustCompile(`(?m)^Total file size: ([\d,.]+) bytes`)

// measure returns the bytes rsync would send to an empty copy: a dry run
// into an empty directory with the same excludes. An rsync whose --stats
// says nothing we can read (openrsync) gives way to the sum of the work
// tree files' sizes, which is what the dry run counts but .git.
func (r *Repo) measure(ctx context.Context, rs *Rsync, env []string, excludes []string) (int64, error) {
	if rs.measureArgs() == nil {
		return r.fileSizes(ctx)
	}
	n, err := r.rsyncMeasure(ctx, rs, env, excludes)
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

func (r *Repo) rsyncMeasure(ctx context.Context, rs *Rsync, env []string, excludes []string) (int64, error) {
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
	args := append(append(rs.syncArgs(ex, syncOpts{noGit: r.Linked}), rs.measureArgs()...), r.Top+"/", dest+"/")
	out, err := rs.run(ctx, r.git.prep, env, args)
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
