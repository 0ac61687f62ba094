package boxagent

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"os"
	"path/filepath"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
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
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	idxTime := fi.ModTime()
	if len(b) < 12+20 || string(b[:4]) != "DIRC" {
		return 0, errIndexFormat
	}
	version := binary.BigEndian.Uint32(b[4:])
	if version < 2 || version > 4 {
		return 0, errIndexFormat
	}
	var h hash.Hash
	var oidLen int
	switch {
	case bytes.Equal(sum(sha1.New(), b[:len(b)-20]), b[len(b)-20:]):
		h, oidLen = sha1.New(), 20
	case len(b) >= 12+32 && bytes.Equal(sum(sha256.New(), b[:len(b)-32]), b[len(b)-32:]):
		h, oidLen = sha256.New(), 32
	default:
		return 0, errIndexFormat // no checksum (index.skipHash), or torn
	}
	end := len(b) - h.Size()
	n := int(binary.BigEndian.Uint32(b[8:]))
	off := 12
	var prev []byte
	changed := 0
	for i := 0; i < n; i++ {
		start := off
		hdr := 40 + oidLen + 2
		if off+hdr > end {
			return 0, errIndexFormat
		}
		mode := binary.BigEndian.Uint32(b[off+24:])
		flags := binary.BigEndian.Uint16(b[off+40+oidLen:])
		off += hdr
		var xflags uint16
		if flags&0x4000 != 0 {
			if version < 3 || off+2 > end {
				return 0, errIndexFormat
			}
			xflags = binary.BigEndian.Uint16(b[off:])
			off += 2
		}
		var name []byte
		if version == 4 {
			strip, k := gitVarint(b[off:end])
			if k <= 0 {
				return 0, errIndexFormat
			}
			off += k
			nul := bytes.IndexByte(b[off:end], 0)
			if nul < 0 || int(strip) > len(prev) {
				return 0, errIndexFormat
			}
			name = append(append([]byte{}, prev[:len(prev)-int(strip)]...), b[off:off+nul]...)
			off += nul + 1
		} else {
			nul := bytes.IndexByte(b[off:end], 0)
			if nul < 0 {
				return 0, errIndexFormat
			}
			name = b[off : off+nul]
			off += nul
			// 1 to 8 NULs pad the entry to a multiple of 8.
			off = start + (off-start+8)&^7
			if off > end {
				return 0, errIndexFormat
			}
		}
		prev = name
		if flags&0xb000 != 0 || xflags&0x6000 != 0 { // assume-valid, stage; skip-worktree, intent-to-add
			continue
		}
		e := b[start:]
		if restatEntry(e, mode, filepath.Join(dir, filepath.FromSlash(string(name))), idxTime) {
			changed++
		}
	}
	for off+8 <= end { // the extensions: a split index cannot be restated alone
		sig := string(b[off : off+4])
		size := int(binary.BigEndian.Uint32(b[off+4:]))
		if sig == "link" {
			return 0, errIndexFormat
		}
		off += 8 + size
	}
	if changed == 0 {
		return 0, nil
	}
	h.Write(b[:end])
	copy(b[end:], h.Sum(nil))
	return changed, atomicfile.WriteFile(p, b, 0o644)
}

var errIndexFormat = errors.New("an index this box agent does not restat")

func sum(h hash.Hash, b []byte) []byte {
	h.Write(b)
	return h.Sum(nil)
}

// gitVarint reads git's offset varint (varint.c): each continuation adds
// one before shifting.
func gitVarint(b []byte) (uint64, int) {
	var v uint64
	for i, c := range b {
		if i > 0 {
			v++
		}
		if i == 9 {
			return 0, -1
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, -1
}

// restatEntry rewrites the stat data of the index entry e (its header at
// the start) from the file at path when the file is what the entry says:
// its kind and, for a file, its executable bit, size and mtime to the
// nanosecond; and the entry is no racily clean one (mtime before the
// index file's, idx).
func restatEntry(e []byte, mode uint32, path string, idx time.Time) bool {
	be := binary.BigEndian
	// Whole seconds, as git built without USE_NSEC compares them.
	if int64(be.Uint32(e[8:])) >= idx.Unix() {
		return false
	}
	st, ok := lstat(path)
	if !ok {
		return false
	}
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
	if uint32(st.size) != be.Uint32(e[36:]) || uint32(st.mtimeSec) != be.Uint32(e[8:]) || uint32(st.mtimeNsec) != be.Uint32(e[12:]) {
		return false
	}
	be.PutUint32(e[0:], uint32(st.ctimeSec))
	be.PutUint32(e[4:], uint32(st.ctimeNsec))
	be.PutUint32(e[16:], uint32(st.dev))
	be.PutUint32(e[20:], uint32(st.ino))
	be.PutUint32(e[28:], uint32(st.uid))
	be.PutUint32(e[32:], uint32(st.gid))
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
	fi, err := os.Stat(p)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	return &savedIndex{path: p, data: b, mtime: fi.ModTime()}
}

// restore puts the index back with its mtime, so git's racy-clean check
// works on it as it did on the laptop.
func (s *savedIndex) restore() error {
	if err := atomicfile.WriteFile(s.path, s.data, 0o644); err != nil {
		return err
	}
	return os.Chtimes(s.path, s.mtime, s.mtime)
}
