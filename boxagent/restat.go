package boxagent

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/gitindex"
)

// restatIndex gives the index of the copy at dir the box's stat data for
// each entry whose file rsync brought unchanged, so that the refresh after
// it hashes only what may differ. The index came from the laptop with the
// laptop's inode, device, owner and ctime, which match no file here, so
// git would re-read every file. rsync -a keeps size and mtime (to the
// nanosecond), so an entry the laptop's git trusted, whose file here has
// its size, mode and mtime to the nanosecond, describes that file: its
// ctime, device, inode and owner become the file's here.
//
// An entry is left as it is (the refresh then checks its content) when it
// is racily clean on the laptop (its mtime not before the index file's:
// the laptop's git itself would re-read it, gitformat-index(5), racy-git),
// flagged (assume-unchanged, skip-worktree, intent-to-add), unmerged, a
// gitlink or a sparse directory. An index git could not read back as we
// write it (a split index, a version or hash we do not know, no checksum)
// is left whole. It reports how many entries it rewrote; the index file is
// replaced by temp file and rename, keeping nothing else of the laptop's
// than its content. The caller checks the result against S and falls back
// to the laptop's index when it differs (a file changed on the laptop with
// its size and mtime put back, which the laptop's git tells by ctime).
func restatIndex(dir string) (int, error) {
	p := filepath.Join(dir, ".git", "index")
	ix, mtime, err := gitindex.ReadFile(p)
	if err != nil {
		return 0, err
	}
	changed := 0
	for i := range ix.Entries {
		e := &ix.Entries[i]
		if e.Plain() && restatEntry(e, filepath.Join(dir, filepath.FromSlash(string(e.Name))), mtime) {
			changed++
		}
	}
	if changed == 0 {
		return 0, nil
	}
	return changed, atomicfile.WriteFile(p, ix.Bytes(), 0o644)
}

// restatEntry rewrites the stat data of the index entry e from the file
// at path when the file is what the entry says: its kind and, for a file,
// its executable bit, size and mtime to the nanosecond; and the entry is
// no racily clean one (mtime before the index file's, idx, in whole
// seconds, as git built without USE_NSEC compares them).
func restatEntry(e *gitindex.Entry, path string, idx time.Time) bool {
	if int64(e.MtimeSec()) >= idx.Unix() {
		return false
	}
	st, ok := lstat(path)
	if !ok {
		return false
	}
	mode := e.Mode()
	switch mode & 0o170000 {
	case 0o100000:
		if st.mode&0o170000 != 0o100000 || (mode&0o111 != 0) != (st.mode&0o100 != 0) {
			return false
		}
	case 0o120000:
		if st.mode&0o170000 != 0o120000 {
			return false
		}
	default: // a gitlink or a sparse directory
		return false
	}
	if uint32(st.size) != e.Size() || uint32(st.mtimeSec) != e.MtimeSec() || uint32(st.mtimeNsec) != e.MtimeNsec() {
		return false
	}
	be := binary.BigEndian
	be.PutUint32(e.Stat[0:], uint32(st.ctimeSec))
	be.PutUint32(e.Stat[4:], uint32(st.ctimeNsec))
	be.PutUint32(e.Stat[16:], uint32(st.dev))
	be.PutUint32(e.Stat[20:], uint32(st.ino))
	be.PutUint32(e.Stat[28:], uint32(st.uid))
	be.PutUint32(e.Stat[32:], uint32(st.gid))
	return true
}

// statData is the part of a file's stat that git keeps in an index entry.
type statData struct {
	mode                uint32
	size                int64
	mtimeSec, mtimeNsec int64
	ctimeSec, ctimeNsec int64
	dev, ino, uid, gid  uint64
}

// refreshCopy refreshes the index of the copy at dir and checks that
// the copy equals S (base). With restat, the index rsync brought keeps
// the laptop's mtime and is restated first (restatIndex); when the copy
// then differs from S, the laptop's index is put back and refreshed
// whole, so an entry restat trusted wrongly costs time, never a file.
func (c *Config) refreshCopy(dir, base string, restat bool) error {
	var laptop *savedIndex
	if restat {
		laptop = saveIndex(dir)
		if n, err := restatIndex(dir); err != nil || n == 0 {
			laptop = nil
		} else {
			c.logf("restated %d index entries", n)
		}
	}
	c.git(dir, nil, nil, "update-index", "-q", "--refresh")
	err := c.checkEqualsS(dir, base)
	if err != nil && laptop != nil && laptop.restore() == nil {
		c.logf("the restated index differs from S (%v): refreshing the laptop's", err)
		c.git(dir, nil, nil, "update-index", "-q", "--refresh")
		err = c.checkEqualsS(dir, base)
	}
	return err
}

// savedIndex is an index file's content and mtime, to put back.
type savedIndex struct {
	path  string
	data  []byte
	mtime time.Time
}

// saveIndex keeps the index of the copy at dir; nil when there is none.
func saveIndex(dir string) *savedIndex {
	p := filepath.Join(dir, ".git", "index")
	b, mtime, err := gitindex.ReadBytes(p)
	if err != nil {
		return nil
	}
	return &savedIndex{path: p, data: b, mtime: mtime}
}

// restore puts the index back with its mtime, so git's racy-clean check
// works on it as it did on the laptop.
func (s *savedIndex) restore() error {
	if err := atomicfile.WriteFile(s.path, s.data, 0o644); err != nil {
		return err
	}
	return os.Chtimes(s.path, s.mtime, s.mtime)
}
