package localbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"
)

// Token kinds. A personal token is issued by IssueToken (`cocoonbox
// localbox start`); a device token by browser sign-in. Only a device token
// can be revoked at /cocoonbox.oauth/revoke.
const (
	KindPersonal = "personal"
	KindDevice   = "device"
)

// TokenRecord is one issued token as the local box keeps it: its sha256,
// never the token itself.
type TokenRecord struct {
	// ID is "dev_" + 16 hex digits.
	ID string `json:"id"`
	// SHA256 is the hex sha256 of the token.
	SHA256 string `json:"sha256"`
	// Name is the device name or a label such as "localbox".
	Name string `json:"name"`
	// Client names the client the token was issued to, such as
	// "cocoonbox-cli" (auth.ClientID) for a sign-in and for `localbox start`.
	Client string `json:"client"`
	// Kind is KindDevice or KindPersonal; empty means KindPersonal.
	Kind string `json:"kind,omitempty"`
	// Account is the account the token belongs to (accounts.json); empty
	// means the owner's, as every token issued before accounts was.
	Account     string `json:"account,omitempty"`
	CreatedAtMS int64  `json:"created_at_ms"`
	// LastUsedAtMS is the start of the minute of the token's last use,
	// in Unix milliseconds; 0 means never.
	LastUsedAtMS int64 `json:"last_used_at_ms,omitempty"`
}

type tokenFile struct {
	Tokens []TokenRecord `json:"tokens"`
}

// errRevoked is the cause of a call's context when its token is revoked.
var errRevoked = errors.New("the token was revoked")

// tokens is the token file DIR/tokens.json and its in-memory index. The
// file is re-read when a token is not found, so that tokens issued by
// another process take effect; every change to it is a read-modify-write
// under an flock of DIR/tokens.json.lock.
type tokens struct {
	path string

	mu       sync.Mutex
	bySum    map[string]TokenRecord // by sha256
	used     map[string]int64       // by id: last uses not yet written
	flushing bool                   // a goroutine writes used
	flushes  sync.WaitGroup
	calls    map[string]map[*call]struct{} // by id: the open streams
}

// call is one open stream, ended by cancel when its token is revoked.
type call struct{ cancel context.CancelCauseFunc }

func (t *tokens) load() error {
	f, err := readTokenFile(t.path)
	if err != nil {
		return err
	}
	t.setFrom(f)
	return nil
}

// setFrom replaces the index with f, keeping last uses not yet written.
func (t *tokens) setFrom(f tokenFile) {
	m := make(map[string]TokenRecord, len(f.Tokens))
	for _, r := range f.Tokens {
		if old, ok := t.bySum[r.SHA256]; ok && old.LastUsedAtMS > r.LastUsedAtMS {
			r.LastUsedAtMS = old.LastUsedAtMS
		}
		m[r.SHA256] = r
	}
	t.bySum = m
}

var tokenRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^cb_[0-9a-f]{64}$`) })

func sum(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// check returns the record for token, or false, and notes its use. The
// index is keyed by the token's sha256, so a check is one map lookup and
// reveals nothing about a token through its timing.
func (t *tokens) check(token string) (TokenRecord, bool) {
	if !tokenRE().MatchString(token) {
		return TokenRecord{}, false
	}
	h := sum(token)
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.bySum[h]
	if !ok {
		if t.load() != nil {
			return TokenRecord{}, false
		}
		if r, ok = t.bySum[h]; !ok {
			return TokenRecord{}, false
		}
	}
	if minute := time.Now().Truncate(time.Minute).UnixMilli(); r.LastUsedAtMS < minute {
		r.LastUsedAtMS = minute
		t.bySum[h] = r
		if t.used == nil {
			t.used = map[string]int64{}
		}
		t.used[r.ID] = minute
		if !t.flushing {
			t.flushing = true
			t.flushes.Add(1)
			go t.flush()
		}
	}
	return r, true
}

// flush writes the last uses noted since the previous flush: at most one
// write per token per minute.
func (t *tokens) flush() {
	defer t.flushes.Done()
	for {
		t.mu.Lock()
		used := t.used
		t.used = nil
		if len(used) == 0 {
			t.flushing = false
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		f, err := updateTokenFile(t.path, func(f *tokenFile) {
			for i, r := range f.Tokens {
				if u := used[r.ID]; u > r.LastUsedAtMS {
					f.Tokens[i].LastUsedAtMS = u
				}
			}
		})
		t.mu.Lock()
		if err == nil {
			t.setFrom(f)
		}
		t.mu.Unlock()
	}
}

// list returns every token's record, oldest first.
func (t *tokens) list() []TokenRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.load()
	out := make([]TokenRecord, 0, len(t.bySum))
	for _, r := range t.bySum {
		out = append(out, r)
	}
	sortRecords(out)
	return out
}

// issue mints a token of kind for name and client in account ("" for the
// owner's) and adds it to the file.
func (t *tokens) issue(name, client, kind, account string) (string, TokenRecord, error) {
	tok, rec, f, err := issueToken(filepath.Dir(t.path), name, client, kind, account)
	if err != nil {
		return "", rec, err
	}
	t.mu.Lock()
	t.setFrom(f)
	t.mu.Unlock()
	return tok, rec, nil
}

// revoke removes every token match selects, ends their open streams, and
// returns their records.
func (t *tokens) revoke(match func(TokenRecord) bool) ([]TokenRecord, error) {
	// Nothing is written when nothing matches: the revocation endpoint
	// answers anyone, and a write is a sync of root's disk under the
	// file's lock. (A token issued meanwhile is new to this revoke.)
	if f, err := readTokenFile(t.path); err != nil {
		return nil, err
	} else if !slices.ContainsFunc(f.Tokens, match) {
		return nil, nil
	}
	var gone []TokenRecord
	f, err := updateTokenFile(t.path, func(f *tokenFile) {
		keep := f.Tokens[:0]
		for _, r := range f.Tokens {
			if match(r) {
				gone = append(gone, r)
			} else {
				keep = append(keep, r)
			}
		}
		f.Tokens = keep
	})
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.setFrom(f)
	var ends []*call
	for _, r := range gone {
		for c := range t.calls[r.ID] {
			ends = append(ends, c)
		}
		delete(t.calls, r.ID)
	}
	t.mu.Unlock()
	for _, c := range ends {
		c.cancel(errRevoked)
	}
	return gone, nil
}

// track registers an open stream on token id until the returned func runs.
func (t *tokens) track(id string, cancel context.CancelCauseFunc) func() {
	c := &call{cancel: cancel}
	t.mu.Lock()
	if t.calls == nil {
		t.calls = map[string]map[*call]struct{}{}
	}
	if t.calls[id] == nil {
		t.calls[id] = map[*call]struct{}{}
	}
	t.calls[id][c] = struct{}{}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.calls[id], c)
		if len(t.calls[id]) == 0 {
			delete(t.calls, id)
		}
		t.mu.Unlock()
	}
}

func readTokenFile(path string) (tokenFile, error) { return readJSONFile[tokenFile](path) }

// updateTokenFile applies mutate to the token file under its lock, writes
// it atomically (0600), and returns what it wrote.
func updateTokenFile(path string, mutate func(*tokenFile)) (tokenFile, error) {
	return updateJSONFile(path, func(f *tokenFile) error { mutate(f); return nil })
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func issueToken(dir, name, client, kind, account string) (string, TokenRecord, tokenFile, error) {
	tok := "cb_" + randomHex(32)
	rec := TokenRecord{
		ID:          "dev_" + randomHex(8),
		SHA256:      sum(tok),
		Name:        name,
		Client:      client,
		Kind:        kind,
		Account:     account,
		CreatedAtMS: time.Now().UnixMilli(),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", rec, tokenFile{}, err
	}
	f, err := updateTokenFile(filepath.Join(dir, "tokens.json"), func(f *tokenFile) {
		f.Tokens = append(f.Tokens, rec)
	})
	if err != nil {
		return "", rec, f, err
	}
	return tok, rec, f, nil
}

// IssueToken mints a new personal token ("cb_" + 64 hex), stores its
// sha256 in the state directory's tokens.json (0600) and returns it. It
// works whether or not a server is running on dir: the server re-reads the
// file.
func IssueToken(dir, name, client string) (string, error) {
	tok, _, _, err := issueToken(dir, name, client, KindPersonal, "")
	return tok, err
}

// sync re-reads the token file and ends the open streams of every token
// that is no longer in it: another process (`localbox account remove`)
// revoked it.
func (t *tokens) sync() error {
	f, err := readTokenFile(t.path)
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(f.Tokens))
	for _, r := range f.Tokens {
		keep[r.ID] = true
	}
	t.mu.Lock()
	t.setFrom(f)
	var ends []*call
	for id, cs := range t.calls {
		if !keep[id] {
			for c := range cs {
				ends = append(ends, c)
			}
			delete(t.calls, id)
		}
	}
	t.mu.Unlock()
	for _, c := range ends {
		c.cancel(errRevoked)
	}
	return nil
}
