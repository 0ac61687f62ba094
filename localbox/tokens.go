package localbox

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// TokenRecord is one issued token as the local box keeps it: its sha256,
// never the token itself.
type TokenRecord struct {
	// ID is "dev_" + 16 hex digits.
	ID string `json:"id"`
	// SHA256 is the hex sha256 of the token.
	SHA256 string `json:"sha256"`
	// Name is the device name or a label such as "localbox start".
	Name string `json:"name"`
	// Client names the client the token was issued to, such as "cli".
	Client      string `json:"client"`
	CreatedAtMS int64  `json:"created_at_ms"`
}

type tokenFile struct {
	Tokens []TokenRecord `json:"tokens"`
}

// tokens is the token file DIR/tokens.json, re-read when a token is not
// found so that tokens issued by another process take effect.
type tokens struct {
	path string
	mu   sync.Mutex
	byID map[string]TokenRecord // by sha256
}

func (t *tokens) load() error {
	b, err := os.ReadFile(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		t.byID = map[string]TokenRecord{}
		return nil
	}
	if err != nil {
		return err
	}
	var f tokenFile
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	m := make(map[string]TokenRecord, len(f.Tokens))
	for _, r := range f.Tokens {
		m[r.SHA256] = r
	}
	t.byID = m
	return nil
}

// check returns the record for token, or false.
func (t *tokens) check(token string) (TokenRecord, bool) {
	sum := sha256.Sum256([]byte(token))
	h := hex.EncodeToString(sum[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.find(h); ok {
		return r, true
	}
	if t.load() != nil {
		return TokenRecord{}, false
	}
	return t.find(h)
}

func (t *tokens) find(h string) (TokenRecord, bool) {
	for k, r := range t.byID {
		if subtle.ConstantTimeCompare([]byte(k), []byte(h)) == 1 {
			return r, true
		}
	}
	return TokenRecord{}, false
}

// IssueToken mints a new token ("cb_" + 64 hex), stores its sha256 in the
// state directory's tokens.json (0600) and returns it. It works whether or
// not a server is running on dir: the server re-reads the file.
func IssueToken(dir, name, client string) (string, error) {
	raw := make([]byte, 32)
	rand.Read(raw)
	tok := "cb_" + hex.EncodeToString(raw)
	idb := make([]byte, 8)
	rand.Read(idb)
	sum := sha256.Sum256([]byte(tok))
	rec := TokenRecord{
		ID:          "dev_" + hex.EncodeToString(idb),
		SHA256:      hex.EncodeToString(sum[:]),
		Name:        name,
		Client:      client,
		CreatedAtMS: time.Now().UnixMilli(),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "tokens.json")
	// Another process may issue a token at the same time: serialise the
	// read-modify-write with an exclusive lock on a file beside it.
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	var f tokenFile
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &f); err != nil {
			return "", err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	f.Tokens = append(f.Tokens, rec)
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return "", err
	}
	return tok, nil
}
