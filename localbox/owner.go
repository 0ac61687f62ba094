package localbox

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// The owner's sign-in to the authorization pages. Whoever can read the
// state directory (0700) is the machine's owner: the local box keeps a
// one-time sign-in code in DIR/signin-code (0600), and the sign-in page
// asks for it. A right code starts a session of sessionTTL and is replaced
// by a new one; maxFailures wrong codes replace it too, so it cannot be
// guessed. docs/login.md.
const (
	sessionTTL  = 12 * time.Hour
	maxFailures = 5
	// codeAlphabet has no 0/O, 1/I/L: the code is read and typed by a person.
	codeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
	codeLen      = 10
)

// SignInCodePath is the file that holds the sign-in code of the local box
// whose state is in dir.
func SignInCodePath(dir string) string { return filepath.Join(dir, "signin-code") }

// SignInCode returns the current sign-in code of the local box whose state
// is in dir, as the owner types it ("XXXXX-XXXXX"). The running local box
// writes it; it changes after each use.
func SignInCode(dir string) (string, error) {
	b, err := os.ReadFile(SignInCodePath(dir))
	if err != nil {
		return "", fmt.Errorf("read the local box's sign-in code: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

type owner struct {
	path string
	logf func(string, ...any)

	mu       sync.Mutex
	code     string // normalized: upper case, no dash
	failures int
	sessions map[string]time.Time // sha256 of the session → expiry
	// accountOf is the account of each session (accounts.go); none or ""
	// is the owner's.
	accountOf map[string]string
}

func newOwner(dir string, logf func(string, ...any)) (*owner, error) {
	o := &owner{path: SignInCodePath(dir), logf: logf, sessions: map[string]time.Time{}}
	if c, err := SignInCode(dir); err == nil && len(normalizeCode(c)) == codeLen {
		o.code = normalizeCode(c)
		return o, nil
	}
	return o, o.rotate()
}

func normalizeCode(c string) string {
	c = strings.ToUpper(c)
	return strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, c)
}

// rotate makes a new code and writes it; o.mu is held or o is new.
func (o *owner) rotate() error {
	b := make([]byte, codeLen)
	rand.Read(b)
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	o.code = string(b)
	o.failures = 0
	shown := o.code[:codeLen/2] + "-" + o.code[codeLen/2:]
	return atomicfile.WriteFile(o.path, []byte(shown+"\n"), 0o600)
}

var errWrongCode = errors.New("wrong sign-in code")

// signIn checks code and starts a session, returning its secret.
func (o *owner) signIn(code string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if subtle.ConstantTimeCompare([]byte(normalizeCode(code)), []byte(o.code)) != 1 {
		o.failures++
		if o.failures >= maxFailures {
			o.logf("sign-in code replaced after %d wrong tries", o.failures)
			if err := o.rotate(); err != nil {
				return "", err
			}
		}
		return "", errWrongCode
	}
	if err := o.rotate(); err != nil {
		return "", err
	}
	s := "cbs_" + randomHex(32)
	now := time.Now()
	for k, exp := range o.sessions {
		if now.After(exp) {
			delete(o.sessions, k)
		}
	}
	o.sessions[sum(s)] = now.Add(sessionTTL)
	o.logf("owner signed in to the authorization pages")
	return s, nil
}

// session reports whether s is a live session.
func (o *owner) session(s string) bool {
	if s == "" {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	exp, ok := o.sessions[sum(s)]
	return ok && time.Now().Before(exp)
}

// endSessions ends every session (sign out everywhere).
func (o *owner) endSessions() {
	o.mu.Lock()
	o.sessions = map[string]time.Time{}
	o.mu.Unlock()
}
