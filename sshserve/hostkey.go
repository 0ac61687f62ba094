package sshserve

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// HostKeyFile is the host key's file name in the state directory, in
// OpenSSH's private key format, as sshd's ssh_host_ed25519_key.
const HostKeyFile = "ssh_host_ed25519_key"

// HostKey returns the user's one ed25519 host key, kept in dir as
// HostKeyFile with mode 0600. The first call creates it (and dir, 0700);
// of two processes creating it at once both end up with the same key. A
// key file readable by others, or one that is not an ed25519 key, is an
// error naming the file and the fix.
func HostKey(dir string) (ssh.Signer, error) {
	path := filepath.Join(dir, HostKeyFile)
	b, fi, err := safefile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := create(dir, path); err != nil {
			return nil, err
		}
		b, fi, err = safefile.ReadFile(path)
	}
	_, notRegular := errors.AsType[*safefile.NotRegularError](err)
	_, tooLarge := errors.AsType[*safefile.TooLargeError](err)
	if notRegular || tooLarge {
		return nil, fmt.Errorf("host key: %w; remove it to make a new one (and run `cocoonbox ssh-config` again to pin it)", err)
	}
	if _, ok := errors.AsType[*safefile.LinkError](err); ok {
		return nil, fmt.Errorf("host key: %w, which root does not follow; set XDG_STATE_HOME to a directory of root's", err)
	}
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	if runtime.GOOS != "windows" {
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("host key %s has mode %04o, readable by others; make it private with `chmod 600 %s`", path, fi.Mode().Perm(), path)
		}
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w; remove it to make a new one (and run `cocoonbox ssh-config` again to pin it)", path, err)
	}
	if signer.PublicKey().Type() != ssh.KeyAlgoED25519 {
		return nil, fmt.Errorf("host key %s is %s, not ed25519; remove it to make a new one (and run `cocoonbox ssh-config` again to pin it)", path, signer.PublicKey().Type())
	}
	return signer, nil
}

// create writes a new key to path unless one is there already.
func create(dir, path string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("host key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("host key: %w", err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "cocoonbox host key")
	if err != nil {
		return fmt.Errorf("host key: %w", err)
	}
	err = atomicfile.Create(path, pem.EncodeToMemory(blk), 0o600)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("host key: %w", err)
	}
	return nil
}

// KnownHostsLine is the known_hosts(5) line that pins key for the hosts
// pattern matches, such as "*.cocoonbox": pattern, the key type and the
// key, without a newline. Pattern is used as given: a comma-separated list
// of host names with * and ? wildcards, as known_hosts takes.
func KnownHostsLine(pattern string, key ssh.PublicKey) string {
	return knownhosts.Line([]string{pattern}, key)
}
