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

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
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
place; --remove takes it out; --dry-run shows the change as a diff and
writes nothing; --print prints the block instead.`,
		Example: `  cocoonbox ssh-config --dry-run
  cocoonbox ssh-config
  ssh main.cocoonbox`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return runSSHConfig(env, s, o) },
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
	state, err := env.stateDir()
	if err != nil {
		return err
	}
	var block string
	if !o.Remove {
		if block, err = sshConfigBlock(state, o); err != nil {
			return err
		}
	}
	if o.Print {
		if err := writeKnownHosts(state); err != nil {
			return err
		}
		_, err := io.WriteString(s.Out, block)
		return err
	}
	path, err := sshConfigPath(env, o.File)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := sshconfig.Parse(string(old))
	if me, ok := errors.AsType[*sshconfig.MarkerError](err); ok {
		return fmt.Errorf("%s: %v; nothing was changed\nfix: edit %s to leave one BEGIN line and one END line after it (or neither), then run: cocoonbox ssh-config", path, me, path)
	}
	if err != nil {
		return err
	}
	if o.Remove && !f.Has() {
		fmt.Fprintf(s.Err, "cocoonbox: %s has no cocoonbox block; nothing to remove\n", path)
		return nil
	}
	text := f.Without()
	if !o.Remove {
		text = f.With(block)
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
		if err := checkWritable(path); err != nil {
			return err
		}
	}
	if !o.Remove {
		// The block's pin: written first, so the block never points at a
		// missing or stale key.
		if err := writeKnownHosts(state); err != nil {
			return err
		}
	}
	warning := ""
	if o.File == "" && !o.Remove {
		warning = passwdHomeWarning(env.Getenv("HOME"), path)
	}
	if text == string(old) {
		fmt.Fprintf(s.Err, "cocoonbox: %s is up to date\n", path)
	} else if err := writeSSHConfig(path, text); err != nil {
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

// sshConfigBlock is the block for o, with the host key's file names in
// state.
func sshConfigBlock(state string, o sshConfigOptions) (string, error) {
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
	opts := sshconfig.Options{Suffix: o.Suffix, SSHPath: p, KnownHosts: filepath.Join(state, knownHostsFile), Ciphers: sshserve.ClientCiphers}
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

// sshConfigPath is the file to change: file, or ~/.ssh/config; a symbolic
// link (a dotfiles manager's) is followed, so the link stays.
func sshConfigPath(env Env, file string) (string, error) {
	if file == "" {
		home := env.Getenv("HOME")
		if home == "" {
			return "", errors.New("HOME is not set; name the file with: cocoonbox ssh-config --file FILE")
		}
		file = filepath.Join(home, ".ssh", "config")
	}
	fi, err := os.Lstat(file)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return file, nil
	}
	target, err := filepath.EvalSymlinks(file)
	if err != nil {
		// A dangling link: a dotfiles checkout not made yet, or moved.
		to, _ := os.Readlink(file)
		return "", fmt.Errorf("%s is a symbolic link to %s, which does not exist; create it (or remove the link), then run ssh-config again", file, to)
	}
	return target, nil
}

// checkWritable refuses a file without its owner's write bit, as an
// editor asks before it writes one: someone made it read-only, and an
// atomic replace would otherwise go through (it needs only the
// directory's permission).
func checkWritable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o200 == 0 {
		return fmt.Errorf("%s is read-only (mode %04o); nothing was changed; make it writable (chmod u+w %[1]s) and run ssh-config again, or use --print", path, fi.Mode().Perm())
	}
	return nil
}

// writeSSHConfig replaces path atomically, keeping its mode; a new file
// is 0600, in a directory made 0700 if missing (as ~/.ssh must be).
func writeSSHConfig(path, text string) error {
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, []byte(text), mode)
}

// writeKnownHosts pins the user's host key (made on first use) under
// sshconfig.HostKeyAlias in our known_hosts file.
func writeKnownHosts(state string) error {
	key, err := sshserve.HostKey(state)
	if err != nil {
		return err
	}
	line := sshserve.KnownHostsLine(sshconfig.HostKeyAlias, key.PublicKey()) + "\n"
	path := filepath.Join(state, knownHostsFile)
	if b, err := os.ReadFile(path); err == nil && string(b) == line {
		return nil
	}
	return atomicfile.WriteFile(path, []byte(line), 0o600)
}
