package offload

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/internal/gitindex"
)

// What back's merge and the snapshot read of an index (the unmerged
// entries, the skip-worktree and assume-unchanged flags, each path's
// mode, object and stage) comes from the index file itself, as git
// ls-files would print it, rather than from a git each: on a tree of
// 11,478 files each such git read the whole index anew. An index
// gitindex does not read, or one ls-files would show otherwise (a split
// index, a sparse one, whose directory entries ls-files expands), is
// asked of git as before.

// Index entry bits (gitformat-index(5)): in the flags, assume-valid and
// the stage; in the extended flags, skip-worktree.
const (
	ceValid        = 0x8000
	ceStageMask    = 0x3000
	ceStageShift   = 12
	ceSkipWorktree = 0x4000
	sparseDirMode  = 0o40000
)

// readIndex reads the index file at path, an empty one when there is
// none; ok is false for one that git is to be asked about instead.
func readIndex(path string) (ix *gitindex.Index, ok bool) {
	ix, _, err := gitindex.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &gitindex.Index{}, true
	}
	if err != nil {
		return nil, false
	}
	for i := range ix.Entries {
		if ix.Entries[i].Mode() == sparseDirMode {
			return nil, false
		}
	}
	return ix, true
}

// indexPath is the repository's index file.
func (r *Repo) indexPath() string { return filepath.Join(r.GitDir, "index") }

// hasUnmerged reports whether the index holds an unmerged entry (git
// ls-files --unmerged prints one).
func (r *Repo) hasUnmerged(ctx context.Context) (bool, error) {
	ix, ok := readIndex(r.indexPath())
	if !ok {
		out, err := r.git.line(ctx, "ls-files", "--unmerged")
		return out != "", err
	}
	for i := range ix.Entries {
		if ix.Entries[i].Flags&ceStageMask != 0 {
			return true, nil
		}
	}
	return false, nil
}

// indexFlagsOf maps the paths of ix that have skip-worktree (a stage-0
// entry's) or assume-unchanged set to those flags, as indexFlags reads
// them from git ls-files -t -v.
func indexFlagsOf(ix *gitindex.Index) map[string]int {
	flags := map[string]int{}
	for i := range ix.Entries {
		e := &ix.Entries[i]
		f := 0
		if e.Flags&ceStageMask == 0 && e.XFlags&ceSkipWorktree != 0 {
			f |= flagSkipWorktree
		}
		if e.Flags&ceValid != 0 {
			f |= flagAssumeUnchanged
		}
		if f != 0 {
			flags[string(e.Name)] = f
		}
	}
	return flags
}

// stagesOf maps each path of ix to "mode oid stage", as stages reads
// them from git ls-files -s (an unmerged path: its last stage).
func stagesOf(ix *gitindex.Index) map[string]string {
	m := make(map[string]string, len(ix.Entries))
	for i := range ix.Entries {
		e := &ix.Entries[i]
		m[string(e.Name)] = fmt.Sprintf("%06o %s %d", e.Mode(), hex.EncodeToString(e.OID), (e.Flags&ceStageMask)>>ceStageShift)
	}
	return m
}
