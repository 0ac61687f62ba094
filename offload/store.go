package offload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/flock"
	"github.com/cocoonbox/cocoonbox/internal/jsonfile"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// DataDir is cocoonbox's per-user data directory for goos: on macOS
// ~/Library/Application Support/CocoonBox, elsewhere
// $XDG_DATA_HOME/cocoonbox (default ~/.local/share/cocoonbox).
func DataDir(goos string, getenv func(string) string) (string, error) {
	home := getenv("HOME")
	if goos == "darwin" {
		if home == "" {
			return "", errors.New("HOME is not set")
		}
		return filepath.Join(home, "Library", "Application Support", "CocoonBox"), nil
	}
	if d := getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "cocoonbox"), nil
	}
	if home == "" {
		return "", errors.New("neither XDG_DATA_HOME nor HOME is set")
	}
	return filepath.Join(home, ".local", "share", "cocoonbox"), nil
}

// Store is the laptop's offload directory, DataDir's offload/ (contract
// "Directories", the Mac rows): 0700, one 0700 directory per repo key
// holding handover.md, env.json, the bundle while it is sent, the box's
// back.md and offload.json while an offload is in flight; and repos.json
// (0600) with the per-repo settings.
type Store struct {
	// Dir is the offload directory.
	Dir string
}

// Record is offload.json: an offload in flight (contract "Directories"),
// and the journal of the offload, back or abandon that runs on it. Offload
// writes it before begin, and every step of the three writes it again,
// with Op and Step set, before the step runs (Store.Journal); a record
// whose Op is set under the repository's lock was left by a command that
// died, and the next offload, back, abandon or restart finishes or undoes
// that step (Resume). It is removed after end.
type Record struct {
	// ID is the offload id.
	ID string `json:"id"`
	// Repo is the repo key.
	Repo string `json:"repo"`
	// Box is the box id and BoxName its name.
	Box     string `json:"box"`
	BoxName string `json:"box_name"`
	// Name is the copy's name and Dir its directory in the box, as begin
	// answered it.
	Name string `json:"name"`
	Dir  string `json:"dir"`
	// Kind is the box CLI: claude, codex or cursor.
	Kind string `json:"kind"`
	// Base is S, the snapshot commit the box started from.
	Base string `json:"base"`
	// Top is the work tree on the laptop.
	Top string `json:"top"`
	// StartedAtMS is when send started, in Unix milliseconds.
	StartedAtMS int64 `json:"started_at_ms"`
	// Seen is the last outbox seq that offload inbox showed.
	Seen int64 `json:"seen"`
	// Op is the command running on the offload: OpOffload, OpBack or
	// OpAbandon; "" when none is (the offload is in flight).
	Op string `json:"op,omitempty"`
	// Step is Op's step, written before it runs (the Step* constants).
	Step string `json:"step,omitempty"`
	// Copy is the box copy's state as begin found it: absent when this
	// offload made the copy, mirror when it was the box's.
	Copy string `json:"copy,omitempty"`
	// Merge is back's merge from its apply step on.
	Merge *MergeJournal `json:"merge,omitempty"`
}

// ErrNoRecord is returned by LoadRecord when no offload is in flight.
var ErrNoRecord = errors.New("nothing of this repo is in a box")

// RepoDir is the directory of one repo key.
func (s Store) RepoDir(key string) string { return filepath.Join(s.Dir, key) }

// HandoverPath is where the local agent writes the hand-over.
func (s Store) HandoverPath(key string) string { return filepath.Join(s.RepoDir(key), "handover.md") }

// BackPath is where back keeps the box agent's last hand-over.
func (s Store) BackPath(key string) string { return filepath.Join(s.RepoDir(key), "back.md") }

func (s Store) recordPath(key string) string { return filepath.Join(s.RepoDir(key), "offload.json") }

// EnsureRepoDir makes the repo's directory and its parents 0700 and
// returns it; a directory others can read is refused with the fix.
func (s Store) EnsureRepoDir(key string) (string, error) {
	d := s.RepoDir(key)
	for _, p := range []string{s.Dir, d} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return "", err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("%s is readable by others (mode %04o); fix it with: chmod 700 '%s'", p, fi.Mode().Perm(), p)
		}
	}
	return d, nil
}

// ErrBadRecord is in LoadRecord's error for an offload.json that does
// not read as a record of the repository (cut short, edited by hand, not
// a file): offload abandon moves it aside (MoveRecordAside).
var ErrBadRecord = errors.New("the offload's record cannot be read")

// LoadRecord reads the repo's offload.json; ErrNoRecord when none. One
// that does not read as the repo's record is an *Error wrapping
// ErrBadRecord, naming abandon.
func (s Store) LoadRecord(key string) (*Record, error) {
	var r Record
	p := s.recordPath(key)
	ok, err := jsonfile.Read(p, &r)
	if err == nil && ok && (r.Repo != key || !isID(r.ID)) {
		err = fmt.Errorf("%s: not a record of this repository (repo %q, id %q)", p, r.Repo, r.ID)
	}
	if err != nil {
		return nil, &Error{Code: ExitFailed, Err: fmt.Errorf("%w: %w", ErrBadRecord, err),
			Next: []Step{{"move it aside and end the offload: ", cmdAbandon}}}
	}
	if !ok {
		return nil, ErrNoRecord
	}
	return &r, nil
}

// isID reports whether id is an offload id: 16 lower-case hex digits.
func isID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// MoveRecordAside renames the repo's offload.json that LoadRecord could
// not read to offload.json.bad-<unix ms>, kept for a look, and returns
// that path.
func (s Store) MoveRecordAside(key string) (string, error) {
	to := fmt.Sprintf("%s.bad-%d", s.recordPath(key), time.Now().UnixMilli())
	return to, os.Rename(s.recordPath(key), to)
}

// SaveRecord writes offload.json atomically, 0600, and syncs it and its
// directory, so that it is on disk when SaveRecord returns (a journal
// entry must outlive a power loss). The Seen of the record on disk, when
// it is the same offload's, is kept if larger: `offload inbox` updates it
// while a back runs.
func (s Store) SaveRecord(r *Record) error { return s.saveRecord(context.Background(), r) }

// saveRecord is SaveRecord whose wait for record.lock ctx ends.
func (s Store) saveRecord(ctx context.Context, r *Record) error {
	return s.updateRecord(ctx, r.Repo, func(old *Record) (*Record, error) {
		if old != nil && old.ID == r.ID {
			r.Seen = max(r.Seen, old.Seen)
		}
		return r, nil
	})
}

// UpdateSeen raises the Seen of offload id's record to seen; another
// offload's record, or none, is left alone.
func (s Store) UpdateSeen(key, id string, seen int64) error {
	return s.updateRecord(context.Background(), key, func(old *Record) (*Record, error) {
		if old == nil || old.ID != id || old.Seen >= seen {
			return nil, nil
		}
		old.Seen = seen
		return old, nil
	})
}

// updateRecord writes f's record (none when f returns nil) under an flock
// of record.lock, with the record on disk (nil when none) as f's argument.
// ctx ends the wait for the lock.
func (s Store) updateRecord(ctx context.Context, key string, f func(old *Record) (*Record, error)) error {
	dir, err := s.EnsureRepoDir(key)
	if err != nil {
		return err
	}
	r, err := jsonfile.UpdateContext(ctx, s.recordPath(key), filepath.Join(dir, "record.lock"), 0o600, f)
	if err != nil || r == nil {
		return err
	}
	return syncDir(dir)
}

// RemoveRecord removes offload.json, durably; no record is no error.
func (s Store) RemoveRecord(key string) error {
	err := os.Remove(s.recordPath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(s.RepoDir(key))
}

// syncDir makes the renames and removals in dir durable (fsync of the
// directory). A file system that cannot sync a directory is no error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// removeRecordOf removes offload.json only when it is offload id's, so a
// rollback never removes another offload's record.
func (s Store) removeRecordOf(key, id string) error {
	if rec, err := s.LoadRecord(key); err != nil || rec.ID != id {
		return nil
	}
	return s.RemoveRecord(key)
}

// LockPath is the repo's lock file, <repo key>/lock.
func (s Store) LockPath(key string) string { return filepath.Join(s.RepoDir(key), "lock") }

// Lock takes the repo's lock for the length of an offload, a back or an
// abandon: an exclusive flock of LockPath, released by the returned func
// or when the process ends. It never waits: a lock another process holds
// is an *Error with ExitRefused naming the lock, and nothing changes.
// Before it returns, the children a killed holder left running are ended
// (children.go).
func (s Store) Lock(key string) (func(), error) {
	if _, err := s.EnsureRepoDir(key); err != nil {
		return nil, err
	}
	p := s.LockPath(key)
	unlock, err := flock.Hold(p, flock.Exclusive|flock.NoWait)
	if errors.Is(err, flock.ErrLocked) {
		return nil, refused(fmt.Errorf("another cocoonbox offload, back or abandon of this repository is running (it holds %s); wait for it to end", p))
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.endChildren(key); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// RepoSettings are one repo's entry in repos.json.
type RepoSettings struct {
	// Top is the work tree, for a reader of the file.
	Top string `json:"top,omitempty"`
	// Secrets are the opted-in entries: names and paths only, never a
	// secret's content.
	Secrets []string `json:"secrets,omitempty"`
	// SizeOK is the user's yes to the size confirm.
	SizeOK bool `json:"size_ok,omitempty"`
}

// Settings is repos.json: RepoSettings by repo key.
type Settings map[string]RepoSettings

func (s Store) settingsPath() string { return filepath.Join(s.Dir, "repos.json") }

// LoadSettings reads repos.json; none is an empty Settings. A file others
// can read is refused with the fix.
func (s Store) LoadSettings() (Settings, error) {
	p := s.settingsPath()
	b, fi, err := safefile.ReadRegular(p, jsonfile.MaxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return Settings{}, nil
	}
	if err != nil {
		return nil, badFile(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %04o); fix it with: chmod 600 '%s'", p, fi.Mode().Perm(), p)
	}
	var v struct {
		Repos Settings `json:"repos"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if v.Repos == nil {
		v.Repos = Settings{}
	}
	return v.Repos, nil
}

// badFile is err, safefile's for a file of ours in the offload directory
// that is no regular file or too large (planted, or a slip), with the
// fix: only its removal gives it back to us. Other errors are err.
func badFile(err error) error {
	nr, notRegular := errors.AsType[*safefile.NotRegularError](err)
	tl, tooLarge := errors.AsType[*safefile.TooLargeError](err)
	switch {
	case notRegular:
		return refused(err, Step{"cocoonbox writes none such; remove it (rm '" + nr.Path + "') and run the command again"})
	case tooLarge:
		return refused(err, Step{"cocoonbox writes none such; remove it (rm '" + tl.Path + "') and run the command again"})
	}
	return err
}

// UpdateSettings applies f to the repo's settings and writes repos.json
// atomically, 0600 in the 0700 offload directory. The read, f and the
// write run under an flock of repos.lock, so concurrent updates (parallel
// `offload secrets add`) each keep their change.
func (s Store) UpdateSettings(key, top string, f func(*RepoSettings) error) error {
	if _, err := s.EnsureRepoDir(key); err != nil {
		return err
	}
	unlock, err := flock.Hold(filepath.Join(s.Dir, "repos.lock"), flock.Exclusive)
	if err != nil {
		return err
	}
	defer unlock()
	all, err := s.LoadSettings()
	if err != nil {
		return err
	}
	rs := all[key]
	rs.Top = top
	if err := f(&rs); err != nil {
		return err
	}
	slices.Sort(rs.Secrets)
	rs.Secrets = slices.Compact(rs.Secrets)
	if len(rs.Secrets) == 0 && !rs.SizeOK {
		delete(all, key)
	} else {
		all[key] = rs
	}
	return jsonfile.Write(s.settingsPath(), map[string]Settings{"repos": all}, 0o600)
}
