package box

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// DefaultEndpoint is the hosted service, used when nothing else names one.
const DefaultEndpoint = "https://api.cocoonbox.dev"

// Endpoint is a parsed endpoint URL. Three forms are accepted:
// https://host[:port] (TLS with the system roots), http://LOOPBACK:port
// (plaintext h2c, loopback addresses only) and unix:///path (plaintext
// over a unix socket).
type Endpoint struct {
	// URL is the endpoint in canonical form; tokens are saved under it.
	URL string
	// Target is the gRPC dial target: "host:port" or "unix:///path".
	Target string
	// TLS is true for https endpoints.
	TLS bool
	// CAFile, if not empty, is a PEM file of the CAs an https endpoint's
	// certificate must chain to, in place of the system's roots (WithCA).
	CAFile string
	// CAFromEnv says CAFile is $COCOONBOX_CA_FILE's, not a pin, for the
	// messages that name it.
	CAFromEnv bool
}

// caName names where ep's CA file comes from, for a message: "the CA in
// FILE", with "(COCOONBOX_CA_FILE)" when the variable named it.
func (ep Endpoint) caName() string {
	if ep.CAFromEnv {
		return "the CA in " + ep.CAFile + " (COCOONBOX_CA_FILE)"
	}
	return "the CA in " + ep.CAFile
}

// ParseEndpoint parses s into an Endpoint. Plaintext to an address that is
// not loopback is refused: a token must never cross a network in clear.
func ParseEndpoint(s string) (Endpoint, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Endpoint{}, fmt.Errorf("endpoint %q is not a URL; want https://HOST, http://127.0.0.1:PORT or unix:///PATH", s)
	}
	switch u.Scheme {
	case "unix":
		p := u.Path
		if u.Host != "" || p == "" || !filepath.IsAbs(p) {
			return Endpoint{}, fmt.Errorf("endpoint %q: a unix endpoint is unix:///ABSOLUTE/PATH", s)
		}
		p = filepath.Clean(p)
		return Endpoint{URL: "unix://" + p, Target: "unix://" + p}, nil
	case "https", "http":
		if u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return Endpoint{}, fmt.Errorf("endpoint %q: want %s://HOST[:PORT] with no path, query or user", s, u.Scheme)
		}
		port := u.Port()
		if port == "" {
			if u.Scheme == "https" {
				port = "443"
			} else {
				return Endpoint{}, fmt.Errorf("endpoint %q: an http endpoint needs a port", s)
			}
		}
		host := u.Hostname()
		if u.Scheme == "http" && !isLoopback(host) {
			return Endpoint{}, fmt.Errorf("endpoint %q refused: plaintext http only to a loopback address (127.0.0.1, [::1], localhost); use https", s)
		}
		hp := net.JoinHostPort(host, port)
		canon := u.Scheme + "://" + hp
		if u.Scheme == "https" && port == "443" {
			canon = "https://" + host
			if strings.Contains(host, ":") {
				canon = "https://[" + host + "]"
			}
		}
		return Endpoint{URL: canon, Target: hp, TLS: u.Scheme == "https"}, nil
	case "":
		return Endpoint{}, fmt.Errorf("endpoint %q has no scheme; want https://HOST, http://127.0.0.1:PORT or unix:///PATH", s)
	default:
		return Endpoint{}, fmt.Errorf("endpoint %q: unknown scheme %q; want https, http (loopback) or unix", s, u.Scheme)
	}
}

// Local reports whether the endpoint is on this machine: a unix socket or
// a loopback address, where a local box serves (cocoonbox localbox), whose
// commands run here. An https endpoint elsewhere may be a team's local box
// or the service, whose boxes are reached only through the API.
func (e Endpoint) Local() bool {
	if strings.HasPrefix(e.Target, "unix://") {
		return true
	}
	host, _, err := net.SplitHostPort(e.Target)
	return err == nil && isLoopback(host)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Config is the CLI's configuration file, DIR/config.json.
type Config struct {
	// Endpoint is the current endpoint URL; empty means none chosen.
	Endpoint string `json:"endpoint,omitempty"`
}

// ConfigDir returns the configuration directory: $XDG_CONFIG_HOME/cocoonbox,
// else $HOME/.config/cocoonbox. getenv reads the environment.
func ConfigDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "cocoonbox"), nil
	}
	h := getenv("HOME")
	if h == "" {
		return "", errors.New("neither XDG_CONFIG_HOME nor HOME is set")
	}
	return filepath.Join(h, ".config", "cocoonbox"), nil
}

// LoadConfig reads dir/config.json; a missing file is an empty Config.
func LoadConfig(dir string) (Config, error) {
	var c Config
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("read %s: %w", filepath.Join(dir, "config.json"), err)
	}
	return c, nil
}

// SaveConfig writes c to dir/config.json atomically, creating dir 0700.
func SaveConfig(dir string, c Config) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "config.json"), append(b, '\n'), 0o600)
}

// ResolveEndpoint picks the endpoint: flag if set, else $COCOONBOX_ENDPOINT,
// else the config file's current endpoint, else DefaultEndpoint; with the
// CA to trust for it (WithCA).
func ResolveEndpoint(flag string, getenv func(string) string) (Endpoint, error) {
	s := flag
	if s == "" {
		s = getenv("COCOONBOX_ENDPOINT")
	}
	if s == "" {
		dir, err := ConfigDir(getenv)
		if err != nil {
			return Endpoint{}, err
		}
		c, err := LoadConfig(dir)
		if err != nil {
			return Endpoint{}, err
		}
		s = c.Endpoint
	}
	if s == "" {
		s = DefaultEndpoint
	}
	ep, err := ParseEndpoint(s)
	if err != nil {
		return ep, err
	}
	return WithCA(ep, getenv), nil
}
