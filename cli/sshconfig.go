package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/internal/safefile"
	"github.com/cocoonbox/cocoonbox/sshconfig"
	"github.com/cocoonbox/cocoonbox/sshserve"
)

// knownHostsFile is our known_hosts file's name in the state directory,
// beside sshserve.HostKeyFile.
const knownHostsFile = "ssh_known_hosts"

// sshConfigOptions are the flags of `cocoonbox ssh-config`.
type sshConfigOptions struct {
	// File is the ssh_config file; empty means ~/.ssh/config.
	File string
	// Suffix is the block's host suffix.
	Suffix string
	// SSHPath is cocoonbox-ssh's path; empty means the one beside this
	// binary, else the one on the PATH.
	SSHPath               string
	Print, DryRun, Remove bool
	// SuffixSet and SSHPathSet: the flags were given. A rewrite without
	// them keeps the existing block's values.
	SuffixSet, SSHPathSet bool
	// created: the block says ssh-config created the file (it did not
	// exist, or the block it replaces says so).
	created bool
}

func newSSHConfig(env Env, s Streams) *cobra.Command {
	var o sshConfigOptions
	c := &cobra.Command{
		Use:   "ssh-config [--suffix .SUFFIX] [--print | --dry-run | --remove] [--file FILE]",
		Short: "Let OpenSSH reach boxes: write a Host *.cocoonbox block into ~/.ssh/config",
		Long: `ssh-config writes one block, between marker lines, at the top of ~/.ssh/config:
"Host *.cocoonbox" with cocoonbox-ssh --stdio as its ProxyCommand and the
host key pinned in a known_hosts file of ours, so that ssh main.cocoonbox,
scp, sftp, rsync -e ssh, git, VS Code Remote-SSH and JetBrains Gateway
reach box main with OpenSSH itself. Run again, it rewrites the block in
place, keeping the block's --suffix and --ssh-path unless given; --remove
takes it out, and the file too when ssh-config created it and nothing
else is in it; --dry-run shows the change as a diff and
writes nothing; --print prints the block instead.`,
		Example: `  cocoonbox ssh-config --dry-run
  cocoonbox ssh-config
  ssh main.cocoonbox`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			o.SuffixSet, o.SSHPathSet = c.Flags().Changed("suffix"), c.Flags().Changed("ssh-path")
			return runSSHConfig(env, s, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Suffix, "suffix", sshconfig.DefaultSuffix, "the host suffix: Host *SUFFIX")
	f.BoolVar(&o.Print, "print", false, "print the block on stdout; change no ssh_config file")
	f.BoolVar(&o.DryRun, "dry-run", false, "show the change as a diff on stdout; write nothing")
	f.BoolVar(&o.Remove, "remove", false, "take the block out")
	f.StringVar(&o.File, "file", "", "the ssh_config file (default: ~/.ssh/config)")
	f.StringVar(&o.SSHPath, "ssh-path", "", "cocoonbox-ssh's path (default: the one beside cocoonbox, else on the PATH)")
	f.SortFlags = false
	return c
}

func runSSHConfig(env Env, s Streams, o sshConfigOptions) error {
	if o.Print && (o.DryRun || o.Remove) {
		return &UsageError{errors.New("ssh-config: --print goes with neither --dry-run nor --remove")}
	}
	if o.File == "-" {
		return &UsageError{errors.New("ssh-config: --file - would write a file named \"-\"; to see the block on stdout, use --print")}
	}
	if h := env.Getenv("HOME"); h != "" && !filepath.IsAbs(h) {
		return fmt.Errorf("HOME=%q is not an absolute path, and ssh would not read what it names; set HOME to your home directory, or name the file with: cocoonbox ssh-config --file FILE", h)
	}
	state, err := env.stateDir()
	if err != nil {
		return err
	}
	if o.Print {
		block, err := sshConfigBlock(env, state, o)
		if err != nil {
			return err
		}
		if _, err := writeKnownHosts(state); err != nil {
			return err
		}
		_, err = io.WriteString(s.Out, block)
		return err
	}
	cf, err := openSSHConfig(env, o.File, o.Remove)
	if err != nil {
		return err
	}
	defer cf.Close()
	if cf.Body != nil {
		return removeLarge(s, o, cf)
	}
	path, linked, old := cf.Path, cf.Linked, cf.Data
	o.created = cf.Info == nil
	f, err := sshconfig.Parse(string(old))
	if err != nil {
		return markerRefusal(path, err)
	}
	if o.Remove && !f.Has() {
		fmt.Fprintf(s.Err, "cocoonbox: %s has no cocoonbox block; nothing to remove\n", path)
		return nil
	}
	text := f.Without()
	o.created = o.created || f.Created()
	// The state before the first run: no file. Not through a link, which
	// would be left dangling.
	deleteFile := o.Remove && o.created && text == "" && !linked
	if !o.Remove {
		kept := keepWritten(env, f, &o)
		block, err := sshConfigBlock(env, state, o)
		if err != nil {
			return err
		}
		text = f.With(block)
		if len(text) > safefile.MaxSize {
			// It would not read the file back, to rewrite or remove the block.
			return fmt.Errorf("with the cocoonbox block %s would be larger than %s, which ssh-config does not read back; nothing was changed; make it smaller (move Host blocks into a file it Includes), or paste the block of --print yourself", path, safefile.Size(safefile.MaxSize))
		}
		if kept != "" {
			fmt.Fprintf(s.Err, "cocoonbox: kept the block's %s (give the flag to change it)\n", kept)
		}
	}
	if o.DryRun {
		if text == string(old) {
			fmt.Fprintf(s.Err, "cocoonbox: %s is up to date\n", path)
			return nil
		}
		_, err := io.WriteString(s.Out, sshconfig.Diff(path, string(old), text))
		return err
	}
	if text != string(old) {
		if err := checkWritable(cf); err != nil {
			return err
		}
	}
	repinned := false
	if !o.Remove {
		// The block's pin: written first, so the block never points at a
		// missing or stale key.
		if repinned, err = writeKnownHosts(state); err != nil {
			return err
		}
	}
	warning := ""
	if o.File == "" && !o.Remove {
		warning = passwdHomeWarning(env.Getenv("HOME"), path)
	}
	if text == string(old) && repinned {
		fmt.Fprintf(s.Err, "cocoonbox: %s is up to date; pinned the host key again in %s\n", path, filepath.Join(state, knownHostsFile))
	} else if text == string(old) {
		fmt.Fprintf(s.Err, "cocoonbox: %s is up to date\n", path)
	} else if deleteFile {
		if err := cf.Remove(); err != nil {
			return err
		}
		fmt.Fprintf(s.Err, "cocoonbox: removed %s: ssh-config created it, and it held nothing but the cocoonbox block\n", path)
	} else if err := writeSSHConfig(cf, strings.NewReader(text)); err != nil {
		return err
	} else if o.Remove {
		fmt.Fprintf(s.Err, "cocoonbox: took the cocoonbox block out of %s\n", path)
	} else if warning != "" {
		fmt.Fprintf(s.Err, "cocoonbox: wrote the cocoonbox block to %s\n", path)
	} else if o.File != "" && !readByOpenSSH(path) {
		fmt.Fprintf(s.Err, "cocoonbox: wrote the cocoonbox block to %s; `ssh -F %s BOX%s` reaches box BOX\n", path, path, o.Suffix)
	} else {
		fmt.Fprintf(s.Err, "cocoonbox: wrote the cocoonbox block to %s; `ssh BOX%s` now reaches box BOX\n", path, o.Suffix)
	}
	if warning != "" {
		fmt.Fprintln(s.Err, warning)
	}
	return nil
}

// passwdHomeWarning is the line saying that OpenSSH will not read path,
// $HOME's ssh_config: it takes the home of the user's passwd entry
// (getpwuid), not $HOME. Empty when the two homes are one, or the entry
// is unknown.
func passwdHomeWarning(home, path string) string {
	u, err := user.Current()
	if err != nil || u.HomeDir == "" || home == "" || sameDir(home, u.HomeDir) {
		return ""
	}
	return fmt.Sprintf("cocoonbox: warning: ssh reads %s (your passwd entry's home), not %s ($HOME); use ssh -F %[2]s, or write the block there: cocoonbox ssh-config --file %[1]s",
		filepath.Join(u.HomeDir, ".ssh", "config"), path)
}

// readByOpenSSH reports whether path is the ssh_config file OpenSSH
// reads without -F: ~/.ssh/config in the passwd entry's home.
func readByOpenSSH(path string) bool {
	u, err := user.Current()
	return err == nil && u.HomeDir != "" && sameFile(path, filepath.Join(u.HomeDir, ".ssh", "config"))
}

func sameDir(a, b string) bool {
	return filepath.Clean(a) == filepath.Clean(b) || sameFile(a, b)
}

// keepWritten fills in o's suffix and cocoonbox-ssh path from f's block
// where their flags were not given, so that a rewrite changes only what
// is asked. It names what it kept that differs from the default, or "".
func keepWritten(env Env, f *sshconfig.File, o *sshConfigOptions) string {
	suffix, path, ok := f.Written(env.platform())
	if !ok {
		return ""
	}
	var kept []string
	if !o.SuffixSet {
		o.Suffix = suffix
		if suffix != sshconfig.DefaultSuffix {
			kept = append(kept, "--suffix "+suffix)
		}
	}
	if !o.SSHPathSet {
		o.SSHPath = path
		if found, err := findSSH(); err != nil || found != path {
			kept = append(kept, "--ssh-path "+path)
		}
	}
	return strings.Join(kept, " and ")
}

// sshConfigBlock is the block for o, with the host key's file names in
// state.
func sshConfigBlock(env Env, state string, o sshConfigOptions) (string, error) {
	p := o.SSHPath
	if p == "" {
		var err error
		if p, err = findSSH(); err != nil {
			return "", err
		}
	}
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	opts := sshconfig.Options{
		Suffix: o.Suffix, SSHPath: p, KnownHosts: filepath.Join(state, knownHostsFile),
		Ciphers: sshserve.ClientCiphers, KexAlgorithms: clientKex(), GOOS: env.platform(),
		Created: o.created,
	}
	if err := opts.Check(); errors.Is(err, sshconfig.ErrEnvVar) {
		// The path is the state directory's; the fix is another one, seen
		// by ssh-config and by the ssh that runs the ProxyCommand alike.
		// Not a usage error: no flag of the command line is wrong.
		return "", fmt.Errorf("ssh-config: %w; set XDG_STATE_HOME to a directory whose path has no \"${\" (in your shell profile, so ssh sees it too) and run ssh-config again", err)
	} else if err != nil {
		return "", &UsageError{fmt.Errorf("ssh-config: %w", err)}
	}
	return sshconfig.Block(opts), nil
}

// clientKex is the block's KexAlgorithms: sshserve.ClientKexAlgorithms,
// after sshserve.KexPQ when the ssh on the PATH knows it (ssh -Q kex).
// Only then: an ssh that does not know a name in the file refuses the
// whole file, every host's connection with it; and one that knows the
// post-quantum exchange warns (OpenSSH 10.1 on) when it gets another.
func clientKex() string {
	out, err := exec.Command("ssh", "-Q", "kex").Output()
	if err == nil && slices.Contains(strings.Fields(string(out)), sshserve.KexPQ) {
		return sshserve.KexPQ + "," + sshserve.ClientKexAlgorithms
	}
	return sshserve.ClientKexAlgorithms
}

// findSSH is cocoonbox-ssh beside this binary (as an install puts them),
// else the one on the PATH. When the PATH's is the same file by another
// name (a package manager's link into a versioned directory), the PATH's
// name is kept: it outlives an upgrade.
func findSSH() (string, error) {
	name := "cocoonbox-ssh"
	if filepath.Separator == '\\' {
		name += ".exe"
	}
	onPath, pathErr := exec.LookPath(name)
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			if pathErr == nil && sameFile(onPath, p) {
				return onPath, nil
			}
			return p, nil
		}
	}
	if pathErr != nil {
		return "", errors.New("cocoonbox-ssh is neither beside cocoonbox nor on the PATH\ninstall it beside cocoonbox, or name it with: cocoonbox ssh-config --ssh-path PATH")
	}
	return onPath, nil
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// markerRefusal is err, Parse's or Scan's for the file at path, made the
// one line and the fix for broken markers.
func markerRefusal(path string, err error) error {
	if me, ok := errors.AsType[*sshconfig.MarkerError](err); ok {
		return fmt.Errorf("%s: %v; nothing was changed\nfix: edit %s to leave one BEGIN line and one END line after it (or neither), then run: cocoonbox ssh-config", path, me, path)
	}
	return err
}

// removeLarge takes the block out of cf, a file past safefile.MaxSize
// that openSSHConfig opened unread, streaming it through
// sshconfig.Scan and Span.Remove: whatever grew around the block, the
// user can take it out.
func removeLarge(s Streams, o sshConfigOptions, cf *safefile.File) error {
	path := cf.Path
	span, err := sshconfig.Scan(cf.Body)
	if err != nil {
		return markerRefusal(path, err)
	}
	if !span.Has() {
		fmt.Fprintf(s.Err, "cocoonbox: %s has no cocoonbox block; nothing to remove\n", path)
		return nil
	}
	if _, err := cf.Body.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if o.DryRun {
		return span.DiffRemove(s.Out, path, cf.Body)
	}
	if err := checkWritable(cf); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		pw.CloseWithError(span.Remove(pw, cf.Body))
	}()
	err = writeSSHConfig(cf, pr)
	pr.Close()
	<-copied
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "cocoonbox: took the cocoonbox block out of %s\n", path)
	return nil
}

// openSSHConfig opens the file to change: file, or ~/.ssh/config. A
// symbolic link (a dotfiles manager's) is followed, so the link stays;
// anything but a regular file and, run by root, a link another user
// controls are refused with one line. So is one past safefile.MaxSize,
// unless large: then it is opened unread (safefile.OpenLarge).
func openSSHConfig(env Env, file string, large bool) (*safefile.File, error) {
	if file == "" {
		home := env.Getenv("HOME")
		if home == "" {
			return nil, errors.New("HOME is not set; name the file with: cocoonbox ssh-config --file FILE")
		}
		file = filepath.Join(home, ".ssh", "config")
	}
	f, err := safefile.Open(file)
	if _, ok := errors.AsType[*safefile.TooLargeError](err); ok && large {
		f, err = safefile.OpenLarge(file)
	} else if ok {
		return nil, fmt.Errorf("%v, which ssh-config does not read; nothing was changed; make it smaller (move Host blocks into a file it Includes), or paste the block of --print yourself (--remove still takes the block out)", err)
	}
	if e, ok := errors.AsType[*safefile.NotRegularError](err); ok && e.Mode.IsDir() {
		return nil, fmt.Errorf("%v; nothing was changed; name a file in it, such as: cocoonbox ssh-config --file %s", e, filepath.Join(e.Path, "config"))
	}
	if err != nil {
		return nil, refusal(err, "name the ssh_config file with --file FILE, or paste the block of --print yourself", "give --file the file the link leads to")
	}
	if f.Linked && f.Info == nil {
		// A dangling link: a dotfiles checkout not made yet, or moved.
		f.Close()
		to, _ := os.Readlink(file)
		return nil, fmt.Errorf("%s is a symbolic link to %s, which does not exist; create it (or remove the link), then run ssh-config again", file, to)
	}
	return f, nil
}

// refusal is the one line for a file that safefile would not open: what
// it is, that nothing changed, and the way out: next, or for a link that
// root must not follow, running as the user who controls it, or link.
// Other errors are err.
func refusal(err error, next, link string) error {
	if e, ok := errors.AsType[*safefile.LinkError](err); ok {
		return fmt.Errorf("%v; run by root, ssh-config follows no link that another user controls, so nothing was changed; run it as that user, or %s", e, link)
	}
	_, notRegular := errors.AsType[*safefile.NotRegularError](err)
	_, tooLarge := errors.AsType[*safefile.TooLargeError](err)
	if notRegular || tooLarge {
		return fmt.Errorf("%v; nothing was changed; %s", err, next)
	}
	return err
}

// checkWritable refuses a file without its owner's write bit, as an
// editor asks before it writes one: someone made it read-only, and an
// atomic replace would otherwise go through (it needs only the
// directory's permission). It refuses too a file with more than one hard
// link, which the replace would split from its other names, and one of
// another owner that a user other than root cannot give back to them.
func checkWritable(f *safefile.File) error {
	fi, path := f.Info, f.Path
	if fi == nil {
		return nil
	}
	if fi.Mode().Perm()&0o200 == 0 {
		return fmt.Errorf("%s is read-only (mode %04o); nothing was changed; make it writable (chmod u+w %[1]s) and run ssh-config again, or use --print", path, fi.Mode().Perm())
	}
	uid, _, links := fileOwner(fi)
	if links > 1 {
		return fmt.Errorf("%s has %d hard links, and replacing it would split it from the others; nothing was changed; make the other names symbolic links to it (ln -sf %[1]s NAME) and run ssh-config again, or paste the block of --print yourself", path, links)
	}
	if uid >= 0 && uid != os.Getuid() && os.Getuid() != 0 {
		return fmt.Errorf("%s belongs to user %d, and replacing it would make it yours; nothing was changed; run ssh-config as that user", path, uid)
	}
	return nil
}

// writeSSHConfig replaces f atomically, keeping its mode, owner and
// group (root writing a user's file leaves it theirs: ssh refuses a
// config another user owns); a new file is 0600, in a directory made 0700
// if missing (as ~/.ssh must be). A group a user other than root cannot
// give is left as the system makes it.
func writeSSHConfig(f *safefile.File, text io.Reader) error {
	mode := fs.FileMode(0o600)
	var keep func(*os.File) error
	if fi := f.Info; fi != nil {
		mode = fi.Mode().Perm()
		if uid, gid, _ := fileOwner(fi); uid >= 0 {
			keep = func(f *os.File) error {
				err := f.Chown(uid, gid)
				if err != nil && os.Getuid() != 0 {
					return nil
				}
				return err
			}
		}
	}
	return f.ReplaceFrom(text, mode, keep)
}

// writeKnownHosts pins the user's host key (made on first use) under
// sshconfig.HostKeyAlias in our known_hosts file. It reports whether it
// wrote the file: there was none, or it did not pin that key.
func writeKnownHosts(state string) (bool, error) {
	key, err := sshserve.HostKey(state)
	if err != nil {
		return false, err
	}
	line := sshserve.KnownHostsLine(sshconfig.HostKeyAlias, key.PublicKey()) + "\n"
	f, err := safefile.Open(filepath.Join(state, knownHostsFile))
	if err != nil {
		return false, refusal(err, "remove it, and ssh-config writes the pin there again", "set XDG_STATE_HOME to a directory of root's")
	}
	defer f.Close()
	if f.Info != nil && string(f.Data) == line {
		return false, nil
	}
	return true, f.Replace([]byte(line), 0o600, nil)
}
