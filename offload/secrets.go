package offload

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxSecrets bounds the opted-in secrets of one offload, in bytes: the
// box keeps them on a 64 MiB tmpfs.
const MaxSecrets = 64 << 20

// SecretEntry is one opted-in secret of a repo (contract "Directories",
// repos.json): file:<repo path> (a file in the work tree), aws, kube,
// gcloud, or ssh:<key name> (a key in ~/.ssh). Names and paths only.
type SecretEntry string

// ParseSecret checks an entry's shape. A file: path must stay inside the
// work tree: relative, clean, no .. element, not under .git/.
func ParseSecret(s string) (SecretEntry, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	switch kind {
	case "aws", "kube", "gcloud":
		if hasArg {
			return "", fmt.Errorf("secret %q: %s takes no argument", s, kind)
		}
	case "file":
		if arg == "" || strings.ContainsAny(arg, "\x00\\\n\r") || path.IsAbs(arg) || path.Clean(arg) != arg || arg == "." ||
			arg == ".." || strings.HasPrefix(arg, "../") || arg == ".git" || strings.HasPrefix(arg, ".git/") {
			return "", fmt.Errorf("secret %q: the path must be a clean relative path inside the repository", s)
		}
	case "ssh":
		if arg == "" || strings.ContainsAny(arg, "/\\\x00\n\r") || arg == "." || arg == ".." {
			return "", fmt.Errorf("secret %q: name a key file in ~/.ssh, such as ssh:id_ed25519", s)
		}
	default:
		return "", fmt.Errorf("secret %q: want file:<path in the repo>, aws, kube, gcloud or ssh:<key name>", s)
	}
	return SecretEntry(s), nil
}

// secretFiles are the entry's files: each member name under secrets/ and
// the laptop path read into the stream. A file: entry is one member,
// secrets/file:<path>; ssh:<key> is secrets/ssh:<key> (and
// secrets/ssh:<key>.pub when present); aws, kube and gcloud are
// directories secrets/<entry>/<file> of the files present.
func (e SecretEntry) secretFiles(top, home string) ([]Member, error) {
	kind, arg, _ := strings.Cut(string(e), ":")
	var ms []Member
	add := func(name, p string, required bool) error {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) && !required {
			return nil
		}
		if err != nil {
			return fmt.Errorf("secret %s: %w", e, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("secret %s: %s is not a regular file (symlinks are refused)", e, p)
		}
		ms = append(ms, Member{Name: "secrets/" + name, Path: p})
		return nil
	}
	var err error
	switch kind {
	case "file":
		if err = noSymlinkBelow(top, arg); err == nil {
			err = add(string(e), filepath.Join(top, filepath.FromSlash(arg)), true)
		}
	case "ssh":
		p := filepath.Join(home, ".ssh", arg)
		if err = add(string(e), p, true); err == nil {
			err = add(string(e)+".pub", p+".pub", false)
		}
	case "aws":
		for _, f := range []string{"credentials", "config"} {
			if err = add("aws/"+f, filepath.Join(home, ".aws", f), false); err != nil {
				break
			}
		}
	case "kube":
		err = add("kube/config", filepath.Join(home, ".kube", "config"), true)
	case "gcloud":
		err = add("gcloud/application_default_credentials.json",
			filepath.Join(home, ".config", "gcloud", "application_default_credentials.json"), true)
	}
	if err == nil && len(ms) == 0 {
		err = fmt.Errorf("secret %s: no file to send", e)
	}
	return ms, err
}

// noSymlinkBelow refuses a relative path one of whose parent directories
// under top is a symlink, which could lead out of the work tree.
func noSymlinkBelow(top, rel string) error {
	dir := top
	parts := strings.Split(rel, "/")
	for _, p := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, p)
		fi, err := os.Lstat(dir)
		if err != nil {
			return fmt.Errorf("secret file:%s: %w", rel, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("secret file:%s: %s is a symlink; symlinks are refused", rel, dir)
		}
	}
	return nil
}

// secretMembers resolves every entry to its members and checks the total
// size against MaxSecrets. Contents are read only when the stream is
// written.
func secretMembers(entries []string, top, home string) ([]Member, error) {
	var all []Member
	var total int64
	for _, s := range entries {
		e, err := ParseSecret(s)
		if err != nil {
			return nil, err
		}
		ms, err := e.secretFiles(top, home)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if fi, err := os.Lstat(m.Path); err == nil {
				total += fi.Size()
			}
		}
		all = append(all, ms...)
	}
	if total > MaxSecrets {
		return nil, fmt.Errorf("the opted-in secrets are %d bytes, over the box's %d MiB", total, MaxSecrets>>20)
	}
	return all, nil
}
