package auth

import (
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// NormalizeURL checks that raw is an absolute http or https URL and returns
// it with every byte outside RFC 3986's unreserved and reserved sets
// percent-encoded, and every "%" not starting an escape encoded as "%25".
// What it returns is plain ASCII that no shell, cmd.exe or URL handler
// reads as anything but one URL.
func NormalizeURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse refuses a bad escape such as %PA; encode first, then
		// parse what is left.
		u, err = url.Parse(escapeURL(raw))
		if err != nil {
			return "", fmt.Errorf("not a URL: %w", err)
		}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("refusing to open a %q link; only http and https", u.Scheme)
	}
	if u.Host == "" || u.User != nil {
		return "", errors.New("refusing to open a link with no host or with a user name")
	}
	return escapeURL(raw), nil
}

// escapeURL percent-encodes what RFC 3986 does not allow in a URI.
func escapeURL(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(c)
		case c != '%' && uriChar(c):
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// uriChar reports whether c is unreserved or reserved (RFC 3986 section 2).
func uriChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0
}

// OpenCommand returns the argv that opens rawURL in a browser on goos:
// $BROWSER when set (its first ":"-separated entry, split into words, with
// "%s" in a word replaced by the URL, else the URL appended), otherwise
// xdg-open (Linux and other Unix), open (macOS) or rundll32
// url.dll,FileProtocolHandler (Windows). The normalized URL is always
// inside exactly one argv element, and no shell or cmd.exe is involved.
func OpenCommand(goos string, getenv func(string) string, rawURL string) ([]string, error) {
	u, err := NormalizeURL(rawURL)
	if err != nil {
		return nil, err
	}
	if b := getenv("BROWSER"); strings.TrimSpace(b) != "" {
		sep := ":"
		if goos == "windows" {
			sep = ";"
		}
		words := strings.Fields(strings.Split(b, sep)[0])
		if len(words) == 0 {
			return nil, errors.New("BROWSER starts with an empty entry")
		}
		placed := false
		for i, w := range words {
			if strings.Contains(w, "%s") {
				words[i] = strings.ReplaceAll(w, "%s", u)
				placed = true
			}
		}
		if !placed {
			words = append(words, u)
		}
		return words, nil
	}
	switch goos {
	case "darwin":
		return []string{"open", u}, nil
	case "windows":
		return []string{"rundll32", "url.dll,FileProtocolHandler", u}, nil
	default:
		return []string{"xdg-open", u}, nil
	}
}

// Open starts the opener of OpenCommand's argv for this system on rawURL
// and returns it running: a browser named by $BROWSER may run until it is
// closed, so callers need not wait. environ is its environment, less
// COCOONBOX_TOKEN, which a browser never needs (DESIGN.md "Security
// invariants" 1). The opener's output is dropped.
func Open(rawURL string, getenv func(string) string, environ []string) (*exec.Cmd, error) {
	argv, err := OpenCommand(runtime.GOOS, getenv, rawURL)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "COCOONBOX_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("open the browser: %w", err)
	}
	return cmd, nil
}

// OpenGrace is how long Launch watches the opener: one that fails
// (xdg-open finding no browser) does so at once.
const OpenGrace = 2 * time.Second

// Launch opens rawURL as Open does and watches the opener for OpenGrace:
// an opener that exits with a failure in that time is an error naming it
// and its status (xdg-open's 3 is "no method available"). One that still
// runs, as a browser named by $BROWSER may until it is closed, or exited
// 0 counts as opened and is left running.
func Launch(rawURL string, getenv func(string) string, environ []string) error {
	cmd, err := Open(rawURL, getenv, environ)
	if err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			return nil
		}
		name := filepath.Base(cmd.Path)
		if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ExitCode() > 0 {
			why := ""
			if name == "xdg-open" {
				why = xdgOpenStatus[ee.ExitCode()]
			}
			if why != "" {
				return fmt.Errorf("the browser opener %s failed (exit status %d: %s)", name, ee.ExitCode(), why)
			}
			return fmt.Errorf("the browser opener %s failed (exit status %d)", name, ee.ExitCode())
		}
		return fmt.Errorf("the browser opener %s failed (%v)", name, err)
	case <-time.After(OpenGrace):
		return nil
	}
}

// xdgOpenStatus is xdg-open(1)'s EXIT CODES.
var xdgOpenStatus = map[int]string{
	1: "error in command line syntax",
	2: "a file does not exist",
	3: "no method available",
	4: "the action failed",
}

// HasBrowser reports whether this system can open a browser at all: on
// macOS and Windows always; elsewhere only with $BROWSER, or a display
// ($DISPLAY or $WAYLAND_DISPLAY) for xdg-open, whose browsers need one.
func HasBrowser(goos string, getenv func(string) string) bool {
	if goos == "darwin" || goos == "windows" || strings.TrimSpace(getenv("BROWSER")) != "" {
		return true
	}
	return getenv("DISPLAY") != "" || getenv("WAYLAND_DISPLAY") != ""
}
