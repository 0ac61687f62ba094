// Package auth holds what the CLI knows of the user's credentials: the token
// store, kept per endpoint; browser sign-in (RFC 8252 loopback redirect with
// PKCE S256, RFC 7636) and revocation (RFC 7009); and the browser opener,
// which never goes through a shell. docs/login.md.
package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// ErrNoToken is returned by Store.Get when no token is saved for an endpoint.
var ErrNoToken = errors.New("no saved token")

// Source says how a token was obtained: "browser" (a device token from
// sign-in, revocable by logout), "paste" (a personal key given with
// --token -) or "localbox" (issued by `cocoonbox localbox start`).
type Source string

// The token sources.
const (
	SourceBrowser  Source = "browser"
	SourcePaste    Source = "paste"
	SourceLocalbox Source = "localbox"
)

// Credential is one saved token and where it came from.
type Credential struct {
	Token  string `json:"token"`
	Source Source `json:"source"`
}

// Store keeps one credential per endpoint URL. A keychain backend can
// replace the file store behind this interface.
type Store interface {
	// Get returns the credential saved for endpoint, or ErrNoToken.
	Get(endpoint string) (Credential, error)
	// Put saves c for endpoint, replacing any earlier one.
	Put(endpoint string, c Credential) error
	// Delete removes the credential for endpoint; deleting none is no error.
	Delete(endpoint string) error
}

// FileStore is a Store in Dir/credentials.json, mode 0600 in a 0700
// directory. A file or directory that others can read is refused with the
// chmod command that fixes it. Writes are atomic.
type FileStore struct {
	// Dir is the configuration directory, such as ~/.config/cocoonbox.
	Dir string
}

var _ Store = FileStore{}

type fileData struct {
	Endpoints map[string]Credential `json:"endpoints"`
}

func (s FileStore) path() string { return filepath.Join(s.Dir, "credentials.json") }

// Path is the credentials file's path, for a caller that watches it for
// changes (each Put replaces it, so its modification time changes).
func (s FileStore) Path() string { return s.path() }

// ModeError reports a credentials file or directory that others can reach.
type ModeError struct {
	Path string
	Mode fs.FileMode
	Want fs.FileMode
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("%s has mode %04o, readable by others, so it is not used; fix it with: chmod %04o %s", e.Path, e.Mode.Perm(), e.Want, e.Path)
}

func (s FileStore) load() (fileData, error) {
	d := fileData{Endpoints: map[string]Credential{}}
	if err := checkMode(s.Dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return d, nil
		}
		return d, err
	}
	if err := checkMode(s.path(), 0o600); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return d, nil
		}
		return d, err
	}
	b, err := os.ReadFile(s.path())
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("read %s: %w", s.path(), err)
	}
	if d.Endpoints == nil {
		d.Endpoints = map[string]Credential{}
	}
	return d, nil
}

func (s FileStore) save(d fileData) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	if err := checkMode(s.Dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(s.path(), append(b, '\n'), 0o600)
}

// Get implements Store.
func (s FileStore) Get(endpoint string) (Credential, error) {
	d, err := s.load()
	if err != nil {
		return Credential{}, err
	}
	c, ok := d.Endpoints[endpoint]
	if !ok || c.Token == "" {
		return Credential{}, ErrNoToken
	}
	return c, nil
}

// Endpoints lists the endpoints a token is saved for, sorted.
func (s FileStore) Endpoints() ([]string, error) {
	d, err := s.load()
	if err != nil {
		return nil, err
	}
	var eps []string
	for ep, c := range d.Endpoints {
		if c.Token != "" {
			eps = append(eps, ep)
		}
	}
	slices.Sort(eps)
	return eps, nil
}

// Put implements Store.
func (s FileStore) Put(endpoint string, c Credential) error {
	if !ValidToken(c.Token) {
		return errors.New("not a cocoonbox token: want cb_ and 64 hex digits")
	}
	d, err := s.load()
	if err != nil {
		return err
	}
	d.Endpoints[endpoint] = c
	return s.save(d)
}

// Delete implements Store.
func (s FileStore) Delete(endpoint string) error {
	d, err := s.load()
	if err != nil {
		return err
	}
	if _, ok := d.Endpoints[endpoint]; !ok {
		return nil
	}
	delete(d.Endpoints, endpoint)
	return s.save(d)
}

var tokenRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^cb_[0-9a-f]{64}$`) })

// ValidToken reports whether t has the shape of a cocoonbox token: "cb_"
// followed by 64 lower-case hex digits.
func ValidToken(t string) bool { return tokenRE().MatchString(t) }
