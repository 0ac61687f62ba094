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

// Bounds of the opted-in secrets, in bytes: the box keeps them on a 64
// MiB tmpfs and takes at most 1 MiB a file, 60 MiB in all.
const (
	MaxSecretFile = 1 << 20
	MaxSecrets    = 60 << 20
)

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

// secretMember is the entry's member of the send stream: secrets/<entry>
// (contract "Send stream"), read from file:<path> in the work tree,
// ssh:<key> in ~/.ssh, aws's ~/.aws/credentials, kube's ~/.kube/config,
// gcloud's application default credentials.
func (e SecretEntry) secretMember(top, home string) (Member, error) {
	kind, arg, _ := strings.Cut(string(e), ":")
	var p string
	switch kind {
	case "file":
		if err := noSymlinkBelow(top, arg); err != nil {
			return Member{}, err
		}
		p = filepath.Join(top, filepath.FromSlash(arg))
	case "ssh":
		p = filepath.Join(home, ".ssh", arg)
	case "aws":
		p = filepath.Join(home, ".aws", "credentials")
	case "kube":
		p = filepath.Join(home, ".kube", "config")
	case "gcloud":
		p = filepath.Join(home, ".config", "gcloud", "application_default_credentials.json")
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Member{}, fmt.Errorf("secret %s: %s does not exist", e, p)
	}
	if err != nil {
		return Member{}, fmt.Errorf("secret %s: %w", e, err)
	}
	if !fi.Mode().IsRegular() {
		return Member{}, fmt.Errorf("secret %s: %s is not a regular file (symlinks are refused)", e, p)
	}
	if fi.Size() > MaxSecretFile {
		return Member{}, fmt.Errorf("secret %s: %s is over %d KiB", e, p, MaxSecretFile>>10)
	}
	return Member{Name: "secrets/" + string(e), Path: p}, nil
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

// secretMembers resolves every entry to its member and checks the
// sizes. Contents are read only when the stream is written.
func secretMembers(entries []string, top, home string) ([]Member, error) {
	var all []Member
	var total int64
	for _, s := range entries {
		e, err := ParseSecret(s)
		if err != nil {
			return nil, err
		}
		m, err := e.secretMember(top, home)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Lstat(m.Path); err == nil {
			total += fi.Size()
		}
		all = append(all, m)
	}
	if total > MaxSecrets {
		return nil, fmt.Errorf("the opted-in secrets are %d bytes, over %d MiB", total, MaxSecrets>>20)
	}
	return all, nil
}

// CheckSecret reports what offload would refuse in the entry's file now:
// missing, not a regular file, too large. Adding an entry whose file does
// not exist yet is allowed; this says so.
func CheckSecret(entry, top, home string) error {
	e, err := ParseSecret(entry)
	if err != nil {
		return err
	}
	_, err = e.secretMember(top, home)
	return err
}
