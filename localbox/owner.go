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

	"golang.org/x/time/rate"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// The owner's sign-in to the authorization pages. Whoever can read the
// state directory (0700) is the machine's owner: the local box keeps a
// one-time sign-in code in DIR/signin-code (0600), and the sign-in page
// asks for it. A right code starts a session of sessionTTL and is replaced
// by a new one. A wrong one changes nothing, so no one can make stale a
// code the owner handed out; instead each source (sourceOfIP) may guess
// wrong guessBurst times at once and then once every guessEvery: some
// 105,000 guesses a year, so that a guesser with every /64 of an IPv6 /48
// has one chance in 120,000 a year of finding a code (of 31^10).
// docs/login.md.
const (
	sessionTTL = 12 * time.Hour
	guessBurst = 5
	guessEvery = 5 * time.Minute
	// maxGuessSources bounds the sources remembered; past it, those whose
	// limit is back to full go, and new sources share one limit while
	// none is (limiter).
	maxGuessSources = 10000
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

	mu      sync.Mutex
	code    string                   // normalized: upper case, no dash
	guesses map[string]*rate.Limiter // by source
	// overflow is the limit new sources share while guesses is full of
	// sources whose limits are not; swept is when guesses was last
	// looked through for full ones.
	overflow *rate.Limiter
	swept    time.Time
	sessions map[string]time.Time // sha256 of the session → expiry
	// accountOf is the account of each session (accounts.go); none or ""
	// is the owner's.
	accountOf map[string]string
}

func newOwner(dir string, logf func(string, ...any)) (*owner, error) {
	o := &owner{path: SignInCodePath(dir), logf: logf, guesses: map[string]*rate.Limiter{}, sessions: map[string]time.Time{}}
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
	shown := o.code[:codeLen/2] + "-" + o.code[codeLen/2:]
	return atomicfile.WriteFile(o.path, []byte(shown+"\n"), 0o600)
}

var errWrongCode = errors.New("wrong sign-in code")

// guessLimitError is signIn's error for a source that guessed wrong too
// often; Wait is how long until it may guess again.
type guessLimitError struct{ Wait time.Duration }

func (e *guessLimitError) Error() string {
	return fmt.Sprintf("too many wrong sign-in codes from your address; try again in %d seconds", e.seconds())
}

// seconds is Wait in whole seconds, rounded up.
func (e *guessLimitError) seconds() int { return int((e.Wait + time.Second - 1) / time.Second) }

// signIn checks code, brought from source, and starts a session,
// returning its secret: of the owner's, when code is the owner's code, or
// of the account accountCode names when it takes code as an account's
// (`localbox account add`; it uses the code up). A source past its limit
// gets a *guessLimitError and its code is not even compared; a wrong code
// counts against the source, never against the code.
func (o *owner) signIn(code, source string, accountCode func(string) (string, bool)) (string, error) {
	o.mu.Lock()
	r := o.limiter(source).Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		o.mu.Unlock()
		return "", &guessLimitError{Wait: d}
	}
	if subtle.ConstantTimeCompare([]byte(normalizeCode(code)), []byte(o.code)) == 1 {
		r.Cancel()
		err := o.rotate()
		o.mu.Unlock()
		if err != nil {
			return "", err
		}
		o.logf("owner signed in to the authorization pages")
		return o.startSession(""), nil
	}
	o.mu.Unlock()
	if account, ok := accountCode(code); ok {
		r.Cancel()
		o.logf("account %s signed in to the authorization pages", account)
		return o.startSession(account), nil
	}
	return "", errWrongCode
}

// limiter is source's limit of wrong guesses; o.mu is held. A source
// with guesses counted against it is never forgotten (that would give it
// them back): once the table holds maxGuessSources, those whose limit is
// full again go (looked for at most once a second), and while none is,
// every new source shares one limit, o.overflow.
func (o *owner) limiter(source string) *rate.Limiter {
	if l := o.guesses[source]; l != nil {
		return l
	}
	if len(o.guesses) >= maxGuessSources {
		if now := time.Now(); now.Sub(o.swept) >= time.Second {
			o.swept = now
			for k, l := range o.guesses {
				if l.TokensAt(now) >= guessBurst {
					delete(o.guesses, k)
				}
			}
		}
		if len(o.guesses) >= maxGuessSources {
			if o.overflow == nil {
				o.overflow = rate.NewLimiter(rate.Every(guessEvery), guessBurst)
			}
			return o.overflow
		}
	}
	l := rate.NewLimiter(rate.Every(guessEvery), guessBurst)
	o.guesses[source] = l
	return l
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
