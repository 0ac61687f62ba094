package boxagent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// keyLoginTimeout bounds a CLI's own sign-in by key (codex's first run
// makes its state databases).
const keyLoginTimeout = 60 * time.Second

// keysDir is where the box agent keeps the API keys it signs CLIs in
// with, one 0600 file per kind, in a 0700 directory.
func (c *Config) keysDir() string {
	return filepath.Join(c.Home, ".local", "share", "cocoonbox", "keys")
}

// SignIn signs the kind's CLI in with the API key that is stdin's first
// line (agentwire.ReadAPIKey), kept where the CLI reads it (the kind's
// KeySignIn): claude's in ~/.local/share/cocoonbox/keys/claude, printed
// by the apiKeyHelper its settings name; codex's by `codex login
// --with-api-key`, with the key on its stdin. The key is never an
// argument, an environment variable or a line of the log, and no link is
// written through. A refusal (no such CLI in the box, a settings file
// that is a link or not JSON) changes nothing; on success the CLI's
// sign-in status says how it is signed in now.
func (c *Config) SignIn(r agentwire.SignInRequest, stdin io.Reader) (*agentwire.SignInResult, error) {
	if err := checkKind(r.Kind); err != nil {
		return nil, err
	}
	if !r.WithAPIKey {
		return nil, usagef("sign-in takes an API key on stdin: give --with-api-key")
	}
	key, err := agentwire.ReadAPIKey(stdin)
	if err != nil {
		return nil, usagef("%v", err)
	}
	k := agentwire.KindOf(r.Kind)
	if why := k.Unsupported(); why != "" {
		return nil, refusedf("%s", why)
	}
	ks := k.KeySignIn(c.Home)
	if ks.Command == "" && ks.Helper == nil {
		return nil, refusedf("%s has no sign-in by key", k.Title())
	}
	if out, err := c.loginShell(probeTimeout, "", "command -v "+k.Binary()); err != nil || strings.TrimSpace(out) == "" {
		return nil, &Error{Code: agentwire.CodeRefused, Err: fmt.Errorf("%s is not installed in the box", k.Binary()),
			CLI: &agentwire.CLIInfo{Kind: r.Kind}}
	}
	res := &agentwire.SignInResult{OK: true}
	if ks.Command != "" {
		res.KeyFile = ks.File
		err = c.keyByCommand(ks, key)
	} else {
		res.KeyFile, res.Settings = filepath.Join(c.keysDir(), k.Name()), ks.Settings
		err = c.keyByHelper(ks, res.KeyFile, key)
	}
	if err != nil {
		return nil, err
	}
	c.logf("%s: the API key is in %s", k.Name(), res.KeyFile)
	res.CLI, _ = c.probeCLI(r.Kind)
	if !res.CLI.SignedIn {
		return nil, failedf("%s still says it is signed out, with the key in %s", k.SignInStatus(), res.KeyFile)
	}
	res.Warning = keySourceWarning(k, ks.Source, res.CLI.KeySource)
	return res, nil
}

// keySourceWarning is the warning of a sign-in by key whose CLI says it
// takes its key from got rather than from want, the source the sign-in
// set up; "" when want is "" (the CLI does not say) or got is want.
func keySourceWarning(k agentwire.Kind, want, got string) string {
	switch {
	case want == "" || got == want:
		return ""
	case got == "":
		return fmt.Sprintf("%s's sign-in status names no key source, so it may not take its key from this sign-in: see %s in the box", k.Title(), k.SignInStatus())
	}
	return fmt.Sprintf("%s takes its key from %s, not from this sign-in: remove that from the box's login environment (~/.profile)", k.Title(), got)
}

// keyByHelper keeps key in file, 0600 in a 0700 directory, and points
// the kind's settings at a helper that prints it. The settings are read
// and changed in memory first, so that a settings file it refuses leaves
// everything as it was.
func (c *Config) keyByHelper(ks agentwire.KeySignIn, file, key string) error {
	old, mode, err := readSettings(ks.Settings)
	if err != nil {
		return err
	}
	settings, err := ks.Helper(old, ks.Settings, "cat "+shellquote.Word(file))
	if err != nil {
		return refusedf("%v", err)
	}
	if err := privateDir(filepath.Dir(file)); err != nil {
		return err
	}
	// The rename replaces whatever is at file, a link included, unfollowed.
	if err := atomicfile.WriteFile(file, []byte(key), 0o600); err != nil {
		return failedf("keep the key: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(ks.Settings), 0o700); err != nil {
		return failedf("%v", err)
	}
	if err := atomicfile.WriteFile(ks.Settings, settings, mode); err != nil {
		return failedf("write %s: %v (the key is kept in %s)", ks.Settings, err, file)
	}
	return nil
}

// readSettings is a settings file's content and mode: none and 0600 when
// it is missing. A link there is refused rather than followed or
// replaced: it leads to a file the user keeps elsewhere (dotfiles).
func readSettings(path string) ([]byte, fs.FileMode, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0o600, nil
	case err != nil:
		return nil, 0, failedf("%v", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, 0, refusedf("%s is a symbolic link; point it at the key yourself, or make it a file and sign in again", path)
	case !fi.Mode().IsRegular():
		return nil, 0, refusedf("%s is not a regular file", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, failedf("%v", err)
	}
	return b, fi.Mode().Perm(), nil
}

// privateDir makes dir when missing and leaves it a directory, not a
// link, that only its owner may enter (0700).
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return failedf("%v", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return failedf("%v", err)
	}
	if !fi.IsDir() {
		return refusedf("%s is not a directory (a link?); remove it and sign in again", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return failedf("%v", err)
	}
	return nil
}

// keyByCommand runs the CLI's own sign-in by key with key on its stdin,
// after removing a link where it keeps the key (it would write through
// one: codex does), and leaves that file 0600.
func (c *Config) keyByCommand(ks agentwire.KeySignIn, key string) error {
	dir := filepath.Dir(ks.File)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return failedf("%v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm()&0o022 != 0 {
		return refusedf("others may write %s (or it cannot be read): make it 0700 and sign in again", dir)
	}
	fi, err := os.Lstat(ks.File)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		if err := os.Remove(ks.File); err != nil {
			return failedf("remove the link %s: %v", ks.File, err)
		}
	case err == nil && !fi.Mode().IsRegular():
		return refusedf("%s is not a regular file", ks.File)
	}
	if _, err := c.loginShellIn(strings.NewReader(key+"\n"), keyLoginTimeout, "", ks.Command); err != nil {
		return failedf("%s: %v", ks.Command, err)
	}
	fi, err = os.Lstat(ks.File)
	if err != nil || !fi.Mode().IsRegular() {
		return failedf("%s left no file %s", ks.Command, ks.File)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return os.Chmod(ks.File, 0o600)
	}
	return nil
}
