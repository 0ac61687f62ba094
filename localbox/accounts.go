package localbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/safefile"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// Accounts, as sshd has users (docs/self-hosting.md "Accounts"). The
// owner's account is implicit: every token without an account, box
// DIR/boxes/NAME, and the server's box user (Server.User). Every other
// account is a record of DIR/accounts.json, its boxes are under
// DIR/accounts/NAME/boxes/, and they run as a Unix user of its own, which
// the machine-wide claims directory gives to this state directory alone.
// The admin commands (`cocoonbox localbox account …`) change the files
// under flock, as root; a running server re-reads them on a miss and on
// Reload (SIGHUP).

// OwnerAccount is the name the owner's account is shown and claimed by;
// no other account may take it.
const OwnerAccount = "owner"

// DefaultUserPrefix is what the Unix user of a new account is named with,
// before the account's name: account alice runs as cocoonbox-alice.
const DefaultUserPrefix = "cocoonbox-"

// geteuid is os.Geteuid, for the tests of a local box not served by root.
var geteuid = os.Geteuid

// accountCodeTTL is how long an account's sign-in code works.
const accountCodeTTL = 24 * time.Hour

var accountRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,21}$`) })

// ValidAccountName reports whether s can name an account: 1 to 22 of a-z,
// 0-9 and '-', starting with a letter (so that with DefaultUserPrefix it
// is a Unix user name of at most 32 bytes), and not OwnerAccount.
func ValidAccountName(s string) bool { return accountRE().MatchString(s) && s != OwnerAccount }

// Account is one account of a local box other than the owner's, as
// DIR/accounts.json keeps it.
type Account struct {
	// Name is the account's name (ValidAccountName).
	Name string `json:"name"`
	// UnixUser is the Unix user its boxes run as, and UID its uid when the
	// account was added: a user deleted and made again under the same name
	// with another uid is not taken for it.
	UnixUser string `json:"unix_user"`
	UID      uint32 `json:"uid"`
	// GID is the user's group id when the account was added (0 in a
	// record from before it was kept). Removing the account ends and
	// removes what is left as UID and GID, whatever the user database
	// says by then.
	GID uint32 `json:"gid,omitempty"`
	// Created is true when the local box made UnixUser (useradd), so that
	// removing the account deletes the user too; false for a user the owner
	// mapped (--unix-user), which stays.
	Created bool `json:"created,omitempty"`
	// CreatedAtMS is when the account was added, in Unix milliseconds.
	CreatedAtMS int64 `json:"created_at_ms"`
	// Engine is the container engine (EngineDocker, EnginePodman) the
	// account was added on: its boxes run as the box image's `user`
	// (uid 1000) in containers of their own, and it has no Unix user
	// (UnixUser "", UID 0). "" is an account with a Unix user, as the
	// process engine needs.
	Engine string `json:"engine,omitempty"`
	// Limits are the limits of each box of the account on a container
	// engine, set by the owner (SetAccountLimits); zeros take the local
	// box's (EngineSettings.Limits).
	Limits Limits `json:"limits,omitzero"`
	// Removing is set when RemoveAccount began to remove the account: it
	// is served no more, gets no sign-in code and is not added again,
	// and the next RemoveAccount finishes what one that stopped half-way
	// left; the record goes last.
	Removing bool `json:"removing,omitempty"`
	// CodeSHA256 is the hex sha256 of the account's one-time sign-in code
	// (normalized: upper case, no dash), and CodeExpiresAtMS when it stops
	// working; both empty once it was used.
	CodeSHA256      string `json:"code_sha256,omitempty"`
	CodeExpiresAtMS int64  `json:"code_expires_at_ms,omitempty"`
}

type accountFile struct {
	Accounts []Account `json:"accounts"`
}

func accountsPath(dir string) string { return filepath.Join(dir, "accounts.json") }

// accountDir is the directory of account name's boxes and its own
// directory above them: DIR/accounts/NAME/boxes and DIR/accounts/NAME.
func accountBoxesDir(dir, name string) string {
	return filepath.Join(dir, "accounts", name, "boxes")
}

func readAccountFile(path string) (accountFile, error) { return readJSONFile[accountFile](path) }

// updateAccountFile applies mutate to DIR/accounts.json under its flock
// and writes it atomically (0600), unless mutate fails.
func updateAccountFile(dir string, mutate func(*accountFile) error) (accountFile, error) {
	return updateJSONFile(accountsPath(dir), mutate)
}

func findAccount(f accountFile, name string) (Account, bool) {
	i := slices.IndexFunc(f.Accounts, func(a Account) bool { return a.Name == name })
	if i < 0 {
		return Account{}, false
	}
	return f.Accounts[i], true
}

// newCode makes a sign-in code: what the person types ("XXXXX-XXXXX") and
// its normalized form's sha256.
func newCode() (shown, sha string) {
	b := make([]byte, codeLen)
	for i := range b {
		var r [1]byte
		rand.Read(r[:])
		b[i] = codeAlphabet[int(r[0])%len(codeAlphabet)]
	}
	c := string(b)
	return c[:codeLen/2] + "-" + c[codeLen/2:], sum(c)
}

// NewAccountCode replaces account name's sign-in code with a new one,
// valid 24 hours, and returns it ("XXXXX-XXXXX"): the person types it on
// the sign-in page when they run `cocoonbox login --endpoint …`, and it
// works once. An unknown account is an error naming `account list`.
func NewAccountCode(dir, name string) (string, error) {
	shown, sha := newCode()
	_, err := updateAccountFile(dir, func(f *accountFile) error {
		for i := range f.Accounts {
			if f.Accounts[i].Name == name {
				if f.Accounts[i].Removing {
					return beingRemoved(name)
				}
				f.Accounts[i].CodeSHA256 = sha
				f.Accounts[i].CodeExpiresAtMS = time.Now().Add(accountCodeTTL).UnixMilli()
				return nil
			}
		}
		return noAccount(name)
	})
	return shown, err
}

// beingRemoved is the refusal of an account a remove began and did not
// finish.
func beingRemoved(name string) error {
	return fmt.Errorf("account %s is being removed (a remove stopped half-way); finish it: cocoonbox localbox account remove %s --yes", name, name)
}

func noAccount(name string) error {
	return fmt.Errorf("no account %q; list them with: cocoonbox localbox account list", name)
}

// useAccountCode spends the account sign-in code code and returns its
// account, or false when no account has it (or it expired).
func useAccountCode(dir, code string) (string, bool) {
	sha := sum(normalizeCode(code))
	f, err := readAccountFile(accountsPath(dir))
	if err != nil {
		return "", false
	}
	found := false
	for _, a := range f.Accounts {
		found = found || a.CodeSHA256 == sha
	}
	if !found {
		return "", false
	}
	name := ""
	updateAccountFile(dir, func(f *accountFile) error {
		for i, a := range f.Accounts {
			if a.CodeSHA256 == sha {
				if time.Now().UnixMilli() < a.CodeExpiresAtMS {
					name = a.Name
				}
				f.Accounts[i].CodeSHA256, f.Accounts[i].CodeExpiresAtMS = "", 0
			}
		}
		return nil
	})
	return name, name != ""
}

// AddAccountOptions are how AddAccount makes an account.
type AddAccountOptions struct {
	// UnixUser, if not empty, is an existing Unix user the account's boxes
	// run as (the owner maps it); else the local box makes
	// UserPrefix+NAME with useradd.
	UnixUser string
	// UserPrefix replaces DefaultUserPrefix when not empty.
	UserPrefix string
	// ClaimsDir is the machine-wide record of which local box owns which
	// Unix user; empty means DefaultClaimsDir.
	ClaimsDir string
	// Token asks for a personal token of the account instead of a sign-in
	// code.
	Token bool
}

// AddedAccount is what AddAccount made: the account, and its sign-in
// code ("XXXXX-XXXXX") or, with AddAccountOptions.Token, its token.
type AddedAccount struct {
	Account Account
	Code    string
	Token   string
}

// ErrNeedsRoot is why a local box not served by root has no accounts but
// the owner's: each account's boxes run as a Unix user of its own, and
// only root can switch to one.
var ErrNeedsRoot = errors.New("accounts need a local box served by root: each account's boxes run as a Unix user of its own, and only root can switch to one; here every token is the owner's (to serve others, run the local box as root: docs/self-hosting.md \"Accounts\")")

// AddAccount adds account name to the local box whose state is in dir,
// with its Unix user (made and claimed here, as root; none when the local
// box's engine is a container engine, where its boxes run as the image's
// `user` in containers) and its box directory (DIR/accounts/NAME/boxes,
// root's, 0711 on the way down). It
// fails with ErrNeedsRoot when not run by root, and with one line naming
// the next step for a bad or taken name, a Unix user another local box
// (or another account) holds, or a state directory the user cannot reach.
// A running server on dir sees the account at its next miss.
func AddAccount(dir, name string, o AddAccountOptions) (AddedAccount, error) {
	var out AddedAccount
	if geteuid() != 0 {
		return out, ErrNeedsRoot
	}
	if !ValidAccountName(name) {
		return out, fmt.Errorf("bad account name %q: use 1 to 22 of a-z, 0-9 and -, starting with a letter (not %q)", name, OwnerAccount)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return out, err
	}
	if err := CheckStateOwner(abs); err != nil {
		return out, err
	}
	if f, err := readAccountFile(accountsPath(abs)); err != nil {
		return out, err
	} else if a, ok := findAccount(f, name); ok && a.Removing {
		return out, beingRemoved(name)
	} else if ok {
		return out, fmt.Errorf("account %s exists; a new sign-in code for it: cocoonbox localbox account code %s", name, name)
	}
	set, err := ReadEngineSettings(abs)
	if err != nil {
		return out, err
	}
	a := Account{Name: name, CreatedAtMS: time.Now().UnixMilli()}
	undo := func() {}
	if set.Engine != EngineProcess {
		// Its boxes are containers: no Unix user of this machine is
		// made or claimed, so no two local boxes collide on its name.
		if o.UnixUser != "" {
			return out, fmt.Errorf("--unix-user %s: this local box runs its boxes on %s, as `user` (uid 1000) in containers of their own, so an account needs no Unix user; leave --unix-user out", o.UnixUser, set.Engine)
		}
		a.Engine = set.Engine
		if err := mkdirAccount(abs, name); err != nil {
			return out, err
		}
	} else if undo, err = addAccountUser(abs, name, o, &a); err != nil {
		return out, err
	}
	if !o.Token {
		out.Code, a.CodeSHA256 = newCode()
		a.CodeExpiresAtMS = time.Now().Add(accountCodeTTL).UnixMilli()
	}
	_, err = updateAccountFile(abs, func(f *accountFile) error {
		if _, ok := findAccount(*f, name); ok {
			return fmt.Errorf("account %s exists", name)
		}
		f.Accounts = append(f.Accounts, a)
		return nil
	})
	if err != nil {
		undo()
		return out, err
	}
	if o.Token {
		if out.Token, _, _, err = issueToken(abs, "account "+name, "localbox", KindPersonal, name); err != nil {
			return out, err
		}
	}
	out.Account = a
	return out, nil
}

// addAccountUser makes (or maps) and claims the Unix user of account
// name of the local box in abs, for the process engine, records it in a,
// makes the account's directories, and returns how to undo it.
func addAccountUser(abs, name string, o AddAccountOptions, a *Account) (undo func(), err error) {
	prefix := o.UserPrefix
	if prefix == "" {
		prefix = DefaultUserPrefix
	}
	unix, mapped := o.UnixUser, o.UnixUser != ""
	if !mapped {
		unix = prefix + name
	}
	claims := o.ClaimsDir
	if claims == "" {
		claims = DefaultClaimsDir
	}
	u, created, err := claimUser(claims, abs, name, unix, mapped)
	if err != nil {
		return nil, err
	}
	undo = func() {
		releaseClaim(claims, abs, unix)
		if created {
			deleteUnixUser(unix)
		}
	}
	if d := closedAbove(abs, u); d != "" {
		undo()
		return nil, fmt.Errorf("unix user %s cannot search %s (%s) above the state directory %s; next: %s", unix, d, describe(d), abs, StateRecipe)
	}
	if err := mkdirAccount(abs, name); err != nil {
		undo()
		return nil, err
	}
	a.UnixUser, a.UID, a.GID, a.Created = unix, u.uid, u.gid, created
	return undo, nil
}

// mkdirAccount makes the state directory and the directories down to
// account name's boxes searchable and not listable (0711): its Unix user
// reaches its own boxes by name and nothing else.
func mkdirAccount(dir, name string) error {
	d := dir
	for _, part := range []string{"", "accounts", name, "boxes"} {
		d = filepath.Join(d, part)
		if err := mkdirOwn(d, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	return nil
}

// mkdirOwn makes directory d with perm unless it exists, and refuses
// anything else there, a symbolic link included, naming the fix: so that
// what is done to d next (chmod, chown) is done to a directory.
func mkdirOwn(d string, perm fs.FileMode) error {
	if err := os.Mkdir(d, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is no directory (%s); move it away and start again", d, safefile.Kind(fi.Mode()))
	}
	return nil
}

// RemoveAccountOptions are how RemoveAccount removes an account.
type RemoveAccountOptions struct {
	// ClaimsDir is as AddAccountOptions.ClaimsDir.
	ClaimsDir string
	// Reload, if not nil, is called once the account and its tokens are
	// gone from the files, to have a running server drop them now (the
	// CLI sends it SIGHUP).
	Reload func()
}

// RemovedAccount says what RemoveAccount did.
type RemovedAccount struct {
	Account Account
	// Tokens is how many of its tokens were revoked; Boxes the boxes
	// whose data was removed.
	Tokens int
	Boxes  []string
	// UserDeleted is true when its Unix user was deleted (the local box
	// made it); a mapped user stays, its claim released.
	UserDeleted bool
}

// RemoveAccount removes account name from the local box whose state is in
// dir: its tokens (their open calls end once the server reloads), every
// process of its Unix user, its boxes' data (the user's files removed as
// that user, then the local box's own), its Unix user if the local box
// made it, its claim, and last its record; on a container engine, its
// boxes' containers, volumes and networks (for an account with no Unix
// user, they and its records are all there is). The record is marked Removing
// first, so that an account a remove left half-way (an error, a kill) is
// served no more, and the next RemoveAccount finishes it. It needs root
// (ErrNeedsRoot).
func RemoveAccount(dir, name string, o RemoveAccountOptions) (RemovedAccount, error) {
	var out RemovedAccount
	if geteuid() != 0 {
		return out, ErrNeedsRoot
	}
	if !ValidAccountName(name) {
		// No account has such a name: nothing to look for, nor lock.
		return out, noAccount(name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return out, err
	}
	if err := CheckStateOwner(abs); err != nil {
		return out, err
	}
	var a Account
	if _, err := updateAccountFile(abs, func(f *accountFile) error {
		i := slices.IndexFunc(f.Accounts, func(x Account) bool { return x.Name == name })
		if i < 0 {
			return noAccount(name)
		}
		if f.Accounts[i].UID == 0 && f.Accounts[i].Engine == "" {
			return fmt.Errorf("account %s's record names uid 0: the local box acts as no account's user there; remove its line from %s by hand", name, accountsPath(abs))
		}
		f.Accounts[i].Removing = true
		f.Accounts[i].CodeSHA256, f.Accounts[i].CodeExpiresAtMS = "", 0
		a = f.Accounts[i]
		return nil
	}); err != nil {
		return out, err
	}
	out.Account = a
	f, err := updateTokenFile(filepath.Join(abs, "tokens.json"), func(f *tokenFile) {
		n := len(f.Tokens)
		f.Tokens = slices.DeleteFunc(f.Tokens, func(t TokenRecord) bool { return t.Account == name })
		out.Tokens = n - len(f.Tokens)
	})
	_ = f
	if err != nil {
		return out, fmt.Errorf("revoke the tokens of account %s: %w", name, err)
	}
	if o.Reload != nil {
		o.Reload()
	}
	if err := purgeAccountEngine(abs, a); err != nil {
		return out, fmt.Errorf("remove the boxes of account %s from the engine: %w", name, err)
	}
	if a.Engine != "" {
		// Its box directories hold the local box's records alone, root's:
		// what its boxes held went with their volumes.
		out.Boxes = boxNames(accountBoxesDir(abs, name))
		if err := os.RemoveAll(filepath.Dir(accountBoxesDir(abs, name))); err != nil {
			return out, err
		}
		_, err = updateAccountFile(abs, func(f *accountFile) error {
			f.Accounts = slices.DeleteFunc(f.Accounts, func(x Account) bool { return x.Name == name })
			return nil
		})
		return out, err
	}
	// What the account left is its recorded uid's, even when its user
	// is gone or its name has another uid now: it is ended and removed
	// as that uid, never left running nor removed by root.
	u, live := accountIDs(a)
	if err := endAccountProcs(abs, u, live); err != nil {
		return out, fmt.Errorf("end the processes of %s (uid %d): %w", a.UnixUser, u.uid, err)
	}
	boxes := accountBoxesDir(abs, name)
	ents, err := os.ReadDir(boxes)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return out, err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if err := removeBoxDir(filepath.Join(boxes, e.Name()), u); err != nil {
			return out, err
		}
		out.Boxes = append(out.Boxes, e.Name())
	}
	for _, d := range []string{boxes, filepath.Dir(boxes)} {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return out, err
		}
	}
	claims := o.ClaimsDir
	if claims == "" {
		claims = DefaultClaimsDir
	}
	if a.Created && live {
		// Its uid and gid are never an account's again: files of the
		// user may remain outside the state directory.
		if err := retireIDs(claims, u.uid, u.gid); err != nil {
			return out, err
		}
		if err := deleteUnixUser(a.UnixUser); err != nil {
			return out, err
		}
		out.UserDeleted = true
	} else if !live {
		// Its user went away (or its name has another uid now): what
		// the uid it had left may remain all the same.
		ids := []uint32{a.UID}
		if a.GID != 0 {
			ids = append(ids, a.GID)
		}
		if err := retireIDs(claims, ids...); err != nil {
			return out, err
		}
		if _, err := user.Lookup(a.UnixUser); err != nil && a.Created {
			// A remove that stopped half-way deleted it.
			out.UserDeleted = true
		}
	}
	if err := releaseClaim(claims, abs, a.UnixUser); err != nil {
		return out, err
	}
	_, err = updateAccountFile(abs, func(f *accountFile) error {
		f.Accounts = slices.DeleteFunc(f.Accounts, func(x Account) bool { return x.Name == name })
		return nil
	})
	return out, err
}

// SetAccountLimits changes the limits of each box of account name of the
// local box whose state is in dir: set(l) changes the recorded ones (a
// zero field takes the local box's, EngineSettings.Limits). A running
// server gives them to the account's containers at its next Reload (the
// CLI sends SIGHUP); one that was not running, at each box's wake. It
// needs root
// (ErrNeedsRoot) and returns the account as recorded.
func SetAccountLimits(dir, name string, set func(*Limits)) (Account, error) {
	var a Account
	if geteuid() != 0 {
		return a, ErrNeedsRoot
	}
	if name == OwnerAccount {
		return a, fmt.Errorf("the owner's boxes take the local box's limits: cocoonbox localbox start --box-memory SIZE --box-cpus N --box-pids N")
	}
	if !ValidAccountName(name) {
		return a, noAccount(name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return a, err
	}
	if err := CheckStateOwner(abs); err != nil {
		return a, err
	}
	_, err = updateAccountFile(abs, func(f *accountFile) error {
		for i := range f.Accounts {
			if f.Accounts[i].Name == name {
				if f.Accounts[i].Removing {
					return beingRemoved(name)
				}
				set(&f.Accounts[i].Limits)
				a = f.Accounts[i]
				return nil
			}
		}
		return noAccount(name)
	})
	return a, err
}

// AccountLimits are the limits of each box of account name of the local
// box whose state is in dir on a container engine, and which of them are
// the account's own (the rest are the local box's, or DefaultLimits).
func AccountLimits(dir, name string) (limits, own Limits, err error) {
	set, err := ReadEngineSettings(dir)
	if err != nil {
		return limits, own, err
	}
	if name != OwnerAccount {
		f, err := readAccountFile(accountsPath(dir))
		if err != nil {
			return limits, own, err
		}
		a, ok := findAccount(f, name)
		if !ok {
			return limits, own, noAccount(name)
		}
		own = a.Limits
	}
	return own.or(set.Limits.or(DefaultLimits)), own, nil
}

// purgeAccountEngine removes from the container engine the containers,
// volumes and networks of account a's boxes, where they are containers:
// on the engine it was added on, or the local box's engine now.
func purgeAccountEngine(abs string, a Account) error {
	set, err := ReadEngineSettings(abs)
	if err != nil {
		return err
	}
	eng := a.Engine
	if eng == "" {
		eng = set.Engine
	}
	if eng == EngineProcess {
		return nil
	}
	if set.Engine != eng {
		set = EngineSettings{Engine: eng}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return purgeEngine(ctx, set, stateLabel+"="+abs, accountLabelKey+"="+a.Name)
}

// AccountInfo is one account as ListAccounts shows it.
type AccountInfo struct {
	// Name is the account's name, OwnerAccount for the owner's.
	Name string
	// UnixUser is the user its boxes run as; "" for the owner's, which the
	// running server chooses (Server.User).
	UnixUser string
	// Boxes are its boxes' names; Devices its tokens' ids.
	Boxes   []string
	Devices []string
	// CodeExpiresAtMS is when its unused sign-in code stops working, in
	// Unix milliseconds; 0 when it has none.
	CodeExpiresAtMS int64
	// Removing says a remove began and did not finish (Account.Removing).
	Removing bool
	// Engine is Account.Engine: "" for an account with a Unix user.
	Engine string
	// Limits are the account's own box limits (Account.Limits); zeros
	// are the local box's.
	Limits Limits
}

// ListAccounts lists the accounts of the local box whose state is in dir,
// the owner's first, then by name.
func ListAccounts(dir string) ([]AccountInfo, error) {
	f, err := readAccountFile(accountsPath(dir))
	if err != nil {
		return nil, err
	}
	tf, err := readTokenFile(filepath.Join(dir, "tokens.json"))
	if err != nil {
		return nil, err
	}
	out := []AccountInfo{{Name: OwnerAccount, Boxes: boxNames(filepath.Join(dir, "boxes"))}}
	slices.SortFunc(f.Accounts, func(a, b Account) int { return cmpString(a.Name, b.Name) })
	for _, a := range f.Accounts {
		out = append(out, AccountInfo{Name: a.Name, UnixUser: a.UnixUser, Boxes: boxNames(accountBoxesDir(dir, a.Name)), CodeExpiresAtMS: a.CodeExpiresAtMS, Removing: a.Removing, Engine: a.Engine, Limits: a.Limits})
	}
	sortRecords(tf.Tokens)
	for _, t := range tf.Tokens {
		for i := range out {
			if out[i].Name == t.Account || (t.Account == "" && i == 0) {
				out[i].Devices = append(out[i].Devices, t.ID)
				break
			}
		}
	}
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// boxNames are the boxes under boxes (directories with a box.json), by name.
func boxNames(boxes string) []string {
	ents, _ := os.ReadDir(boxes)
	var out []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(boxes, e.Name(), "box.json")); err == nil && e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// accountSet is the server's view of DIR/accounts.json: each account with
// its Unix user, looked up once.
type accountSet struct {
	dir string
	// engine is the server's engine (one of the Engine constants): on a
	// container engine an account's boxes need no Unix user.
	engine string

	mu     sync.Mutex
	byName map[string]*liveAccount
}

type liveAccount struct {
	Account
	user *boxUser
	// err says why the account's boxes cannot be served (no such user, a
	// server not run by root), or nil.
	err error
}

// load re-reads the file and returns the accounts that are gone since.
func (as *accountSet) load() ([]string, error) {
	f, err := readAccountFile(accountsPath(as.dir))
	if err != nil {
		return nil, err
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	old := as.byName
	as.byName = map[string]*liveAccount{}
	for _, a := range f.Accounts {
		if a.Removing {
			// Gone for the server: its boxes stop, its calls are refused.
			continue
		}
		if la, ok := old[a.Name]; ok && la.Account.UnixUser == a.UnixUser && la.Account.UID == a.UID && la.Account.Engine == a.Engine {
			la.Account = a
			as.byName[a.Name] = la
			continue
		}
		la := &liveAccount{Account: a}
		if a.Engine != "" {
			if as.engine == EngineProcess {
				la.err = fmt.Errorf("account %s has no Unix user: it was added for the %s engine, where its boxes are containers; start the local box with --engine %s again, or remove the account and add it again", a.Name, a.Engine, a.Engine)
			}
			as.byName[a.Name] = la
			continue
		}
		switch u, err := lookupBoxUser(a.UnixUser); {
		case os.Geteuid() != 0:
			la.err = ErrNeedsRoot
		case err != nil:
			la.err = fmt.Errorf("account %s: %w", a.Name, err)
		case u.uid != a.UID || u.uid == 0:
			la.err = fmt.Errorf("account %s: unix user %s has uid %d, not %d as when the account was added; remove the account and add it again", a.Name, a.UnixUser, u.uid, a.UID)
		default:
			la.user = u
		}
		as.byName[a.Name] = la
	}
	var gone []string
	for n := range old {
		if as.byName[n] == nil {
			gone = append(gone, n)
		}
	}
	return gone, nil
}

// get returns account name, re-reading the file when it is not known.
func (as *accountSet) get(name string) (*liveAccount, bool) {
	as.mu.Lock()
	la, ok := as.byName[name]
	as.mu.Unlock()
	if ok {
		return la, true
	}
	as.load()
	as.mu.Lock()
	defer as.mu.Unlock()
	la, ok = as.byName[name]
	return la, ok
}

// limits are account name's own box limits (Account.Limits), as last
// read.
func (as *accountSet) limits(name string) Limits {
	la, ok := as.get(name)
	if !ok {
		return Limits{}
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	return la.Limits
}

func (as *accountSet) names() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	var out []string
	for n := range as.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// accountUser is the Unix user of account name's boxes, or nil.
func (s *Server) accountUser(name string) *boxUser {
	if la, ok := s.accts.get(name); ok {
		return la.user
	}
	return nil
}

// openAccount makes sure the boxes of account name (never the owner's)
// are in the registry, with its box main, their homes prepared and,
// once the server serves, the running ones' inboxes started, and returns
// why they cannot be served, or nil.
func (s *Server) openAccount(name string) error {
	return s.openAccountThen(name, func(bs []*box) {
		s.eng.prepare(bs)
		if s.serving.Load() {
			for _, b := range bs {
				if b.proto().GetState() == controlv1.BoxState_BOX_STATE_RUNNING {
					s.startInbox(b)
				}
			}
		}
	})
}

// openAccountThen is openAccount with ready in place of its last step:
// ready gets the account's boxes, given to its user, when it opens
// them, before any call of the account may use them.
func (s *Server) openAccountThen(name string, ready func([]*box)) error {
	la, ok := s.accts.get(name)
	if !ok {
		return noAccount(name)
	}
	if la.err != nil {
		return la.err
	}
	s.acctMu.Lock()
	defer s.acctMu.Unlock()
	if s.opened[name] {
		return nil
	}
	if err := s.reg.loadAccount(name); err != nil {
		return err
	}
	if _, _, err := s.reg.add(name, DefaultBox); err != nil {
		return err
	}
	bs := s.reg.list(name)
	for _, b := range bs {
		if err := s.eng.boot(context.Background(), b); err != nil {
			return fmt.Errorf("account %s: %w", name, err)
		}
	}
	ready(bs)
	if s.opened == nil {
		s.opened = map[string]bool{}
	}
	s.opened[name] = true
	return nil
}

// Reload re-reads the state directory's accounts and tokens, as
// `localbox account remove` asks with SIGHUP: the calls of tokens no
// longer there end, and the boxes of accounts no longer there stop (their
// commands, inboxes and tmux end) and leave the registry. On a container
// engine each account's boxes get the limits it has now.
func (s *Server) Reload() error {
	if err := s.init(); err != nil {
		return err
	}
	gone, err := s.accts.load()
	if err != nil {
		return err
	}
	if err := s.toks.sync(); err != nil {
		return err
	}
	if c, ok := s.eng.(*containerEngine); ok {
		// Limits an owner set (account limits) apply at once.
		for _, name := range s.accts.names() {
			for _, b := range s.reg.list(name) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := c.updateLimits(ctx, b); err != nil {
					s.logf("%v", err)
				}
				cancel()
			}
		}
	}
	for _, name := range gone {
		s.acctMu.Lock()
		delete(s.opened, name)
		s.acctMu.Unlock()
		for _, b := range s.reg.list(name) {
			s.reg.remove(b)
			s.endBox(b)
			if c, ok := s.eng.(*containerEngine); ok {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := c.stop(ctx, b); err != nil {
					s.logf("%v", err)
				}
				cancel()
			}
		}
		s.owner.endSessionsOf(name)
		s.logf("account %s removed: its boxes stopped", name)
	}
	return nil
}

// accountKey carries the account of a console session in a request's
// context; "" is the owner's.
type accountKey struct{}

func accountOfRequest(ctx context.Context) string {
	a, _ := ctx.Value(accountKey{}).(string)
	return a
}

// startSession starts a console session of account ("" for the owner's)
// and returns its secret.
func (o *owner) startSession(account string) string {
	s := "cbs_" + randomHex(32)
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for k, exp := range o.sessions {
		if now.After(exp) {
			delete(o.sessions, k)
			delete(o.accountOf, k)
		}
	}
	o.sessions[sum(s)] = now.Add(sessionTTL)
	if o.accountOf == nil {
		o.accountOf = map[string]string{}
	}
	o.accountOf[sum(s)] = account
	return s
}

// sessionAccount is the account of live session s ("" for the owner's).
func (o *owner) sessionAccount(s string) (string, bool) {
	if !o.session(s) {
		return "", false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.accountOf[sum(s)], true
}

// endSessionsOf ends every console session of account ("" for the
// owner's).
func (o *owner) endSessionsOf(account string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.sessions {
		if o.accountOf[k] == account {
			delete(o.sessions, k)
			delete(o.accountOf, k)
		}
	}
}
