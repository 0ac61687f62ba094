package boxagent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// presetTrust marks dir as trusted for the kind's CLI, so that no trust
// dialog holds the first prompt, and changes nothing else of its config
// (the kind's Trust says how). When the box's login environment sets the
// kind's API key variable, the key's last 20 characters go to Trust too
// (claude's "Detected a custom API key" dialog would hold the first
// prompt otherwise).
func (c *Config) presetTrust(kind, dir string) error {
	k := agentwire.KindOf(kind)
	path := k.TrustFile(c.Home)
	if path == "" {
		return nil
	}
	tail := ""
	if v := k.APIKeyVar(); v != "" {
		tail = c.apiKeyTail(v)
	}
	return writeTrust(k, path, dir, tail)
}

// writeTrust applies k's Trust to the file at path: written with the
// mode Trust asks for, else the file's own (0600 for a new file).
func writeTrust(k agentwire.Kind, path, dir, keyTail string) error {
	mode := os.FileMode(0o600)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	out, perm, err := k.Trust(b, path, dir, keyTail)
	if err != nil {
		return err
	}
	if perm != 0 {
		mode = os.FileMode(perm)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, out, mode)
}

// apiKeyTail is the last 20 characters of the variable v in the box's
// login environment, as claude keeps an approved key, or "".
func (c *Config) apiKeyTail(v string) string {
	out, err := c.loginShell(probeTimeout, "", `printf '%s' "${`+v+`-}"`)
	k := strings.TrimSpace(out)
	if err != nil || k == "" || strings.ContainsAny(k, " \n") {
		return ""
	}
	if len(k) > 20 {
		k = k[len(k)-20:]
	}
	return k
}
