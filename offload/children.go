package offload

// The children of a command: every git and rsync an offload, a back or
// an abandon starts here runs in one process group of its own
// (proc.Group), recorded in <repo key>/children while the command holds
// the repository's lock. A command killed with SIGKILL takes none of its
// children with it, and one of them may still write refs, the index or
// the box copy; the next command that takes the lock ends the recorded
// group, and waits for it to be gone, before its resume or its own work.
// The record is written once the group's anchor runs and before any child
// starts (the anchor ends with this process, so a kill before the write
// leaves nothing); power loss ends the children too, so the record is not
// synced. docs/offload.md "The journal" says what a user sees.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// Grace is what a killed command's children get between SIGTERM and
// SIGKILL; goneWait how long the next command then waits for them to be
// gone before it refuses.
const (
	childrenGrace = 2 * time.Second
	goneWait      = 10 * time.Second
)

// childrenMax bounds the children record, which names one process group.
const childrenMax = 4 << 10

func (s Store) childrenPath(key string) string { return filepath.Join(s.RepoDir(key), "children") }

// endChildren ends the process group of the children the repository's
// last command recorded, when it still lives (that command was killed),
// and drops the record. It reports whether a group was ended. Its error
// is a group that outlives SIGKILL, an *Error that names it.
func (s Store) endChildren(key string) (bool, error) {
	p := s.childrenPath(key)
	b, _, err := safefile.ReadRegular(p, childrenMax)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		// No group id of ours: a FIFO or device planted there, or a
		// file that is not one, which lockRepo's write would wait on.
		if rerr := os.Remove(p); rerr != nil {
			return false, badFile(err)
		}
		return false, nil
	}
	ended, err := proc.EndGroup(strings.TrimSpace(string(b)), childrenGrace, goneWait)
	if errors.Is(err, proc.ErrGroupLives) {
		return ended, refused(fmt.Errorf("a git or rsync that a killed cocoonbox started here (%s) %w", p, err),
			Step{"wait for it to end, then run the command again"})
	}
	// A record that cannot be read names no group that still lives: the
	// command that wrote it died as it wrote.
	os.Remove(p)
	return ended, nil
}

// lockRepo is Store.Lock for a command on r that starts children: with
// the lock held, r's git and rsync run in a process group of their own,
// recorded in the children file, until the returned func releases both.
func (s Store) lockRepo(r *Repo) (func(), error) {
	unlock, err := s.Lock(r.Key)
	if err != nil {
		return nil, err
	}
	g, err := proc.StartGroup()
	if err != nil {
		unlock()
		return nil, err
	}
	if g == nil {
		return unlock, nil // no groups here (Windows)
	}
	if err := os.WriteFile(s.childrenPath(r.Key), []byte(g.String()+"\n"), 0o600); err != nil {
		g.Close()
		unlock()
		return nil, err
	}
	// Out of the terminal's group, a git that asked on the terminal would
	// stop (SIGTTIN); it fails in one line instead, as detached ones do.
	saved := r.git
	r.git = r.git.with("GIT_TERMINAL_PROMPT=0")
	r.git.prep = g.Join
	return func() {
		r.git = saved
		g.Close()
		os.Remove(s.childrenPath(r.Key))
		unlock()
	}, nil
}
