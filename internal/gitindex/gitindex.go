// Package gitindex reads and rewrites the stat data of a git index file
// (gitformat-index(5), versions 2 to 4) in place: entries are found, their
// stat fields changed, and the checksum written anew. Nothing else of the
// file changes, so its extensions (and the offsets they hold) stay valid.
// It is for the offload's own copies of an index; git does all the rest.
package gitindex

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"io"
	"os"
	"time"
)

// ErrFormat is an index this package does not rewrite: not an index, a
// version other than 2 to 4, no checksum (index.skipHash), a split index,
// or one cut short.
var ErrFormat = errors.New("an index this program does not rewrite")

// Entry is one entry of an index. Stat is its stat data in the file:
// Stat[0:40] holds ctime s, ns, mtime s, ns, dev, ino, mode, uid, gid and
// size, each 32 bits big-endian; changing it changes the file.
type Entry struct {
	Name []byte
	Stat []byte
	OID  []byte
	// Flags are the entry's 16 flag bits, XFlags its extended ones (0
	// when it has none).
	Flags, XFlags uint16
}

// Mode is the entry's mode: 0100644, 0100755, 0120000, 0160000 or (a
// sparse directory) 040000.
func (e *Entry) Mode() uint32 { return binary.BigEndian.Uint32(e.Stat[24:]) }

// MtimeSec is the whole seconds of the entry's mtime (32 bits, as git
// keeps it).
func (e *Entry) MtimeSec() uint32 { return binary.BigEndian.Uint32(e.Stat[8:]) }

// MtimeNsec is the nanoseconds of the entry's mtime (0 from a git built
// without USE_NSEC).
func (e *Entry) MtimeNsec() uint32 { return binary.BigEndian.Uint32(e.Stat[12:]) }

// Size is the entry's file size in bytes, modulo 2^32 as git keeps it.
func (e *Entry) Size() uint32 { return binary.BigEndian.Uint32(e.Stat[36:]) }

// Plain says the entry is stage 0 with none of assume-unchanged,
// skip-worktree and intent-to-add set: one whose stat data git trusts on
// its own.
func (e *Entry) Plain() bool { return e.Flags&0xb000 == 0 && e.XFlags&0x6000 == 0 }

// Index is an index file read into memory.
type Index struct {
	data    []byte
	hash    func() hash.Hash
	end     int
	Entries []Entry
}

// Parse reads an index file's content. The entries alias b.
func Parse(b []byte) (*Index, error) {
	if len(b) < 12+20 || string(b[:4]) != "DIRC" {
		return nil, ErrFormat
	}
	version := binary.BigEndian.Uint32(b[4:])
	if version < 2 || version > 4 {
		return nil, ErrFormat
	}
	ix := &Index{data: b}
	var oidLen int
	switch {
	case bytes.Equal(sum(sha1.New(), b[:len(b)-20]), b[len(b)-20:]):
		ix.hash, oidLen = sha1.New, 20
	case len(b) >= 12+32 && bytes.Equal(sum(sha256.New(), b[:len(b)-32]), b[len(b)-32:]):
		ix.hash, oidLen = sha256.New, 32
	default:
		return nil, ErrFormat
	}
	end := len(b) - ix.hash().Size()
	ix.end = end
	n := int(binary.BigEndian.Uint32(b[8:]))
	off := 12
	var prev []byte
	for i := 0; i < n; i++ {
		start := off
		hdr := 40 + oidLen + 2
		if off+hdr > end {
			return nil, ErrFormat
		}
		e := Entry{Stat: b[off : off+40 : off+40], OID: b[off+40 : off+40+oidLen], Flags: binary.BigEndian.Uint16(b[off+40+oidLen:])}
		off += hdr
		if e.Flags&0x4000 != 0 {
			if version < 3 || off+2 > end {
				return nil, ErrFormat
			}
			e.XFlags = binary.BigEndian.Uint16(b[off:])
			off += 2
		}
		if version == 4 {
			strip, k := varint(b[off:end])
			if k <= 0 {
				return nil, ErrFormat
			}
			off += k
			nul := bytes.IndexByte(b[off:end], 0)
			if nul < 0 || strip > uint64(len(prev)) {
				return nil, ErrFormat
			}
			e.Name = append(append([]byte{}, prev[:len(prev)-int(strip)]...), b[off:off+nul]...)
			off += nul + 1
		} else {
			nul := bytes.IndexByte(b[off:end], 0)
			if nul < 0 {
				return nil, ErrFormat
			}
			e.Name = b[off : off+nul]
			off += nul
			// 1 to 8 NULs pad the entry to a multiple of 8.
			off = start + (off-start+8)&^7
			if off > end {
				return nil, ErrFormat
			}
		}
		prev = e.Name
		ix.Entries = append(ix.Entries, e)
	}
	for off+8 <= end {
		if string(b[off:off+4]) == "link" { // a split index: entries live elsewhere too
			return nil, ErrFormat
		}
		off += 8 + int(binary.BigEndian.Uint32(b[off+4:]))
	}
	return ix, nil
}

// ReadFile reads and parses the index file at path, and returns it with
// the file's mtime, which git's racy-clean check compares entries with.
func ReadFile(path string) (*Index, time.Time, error) {
	b, mtime, err := ReadBytes(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	ix, err := Parse(b)
	return ix, mtime, err
}

// ReadBytes reads the index file at path as it is, with its mtime. git
// trusts an entry's stat data only when the entry is older than the index
// file; entries as new as it ("racily clean") have their content checked.
// So a copy of an index gets the original's mtime (os.Chtimes): with a
// fresh one, those entries would be trusted, and an edit of the same size
// in the second of the last index write would be missed
// (gitformat-index(5), Documentation/technical/racy-git.txt).
func ReadBytes(path string) ([]byte, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	b, err := io.ReadAll(f)
	return b, fi.ModTime(), err
}

// Bytes is the index file with the entries' stat data as they are now
// and its checksum written anew.
func (ix *Index) Bytes() []byte {
	h := ix.hash()
	h.Write(ix.data[:ix.end])
	copy(ix.data[ix.end:], h.Sum(nil))
	return ix.data
}

func sum(h hash.Hash, b []byte) []byte {
	h.Write(b)
	return h.Sum(nil)
}

// varint reads git's offset varint (varint.c): each continuation byte
// adds one before the shift.
func varint(b []byte) (uint64, int) {
	var v uint64
	for i, c := range b {
		if i == 9 {
			return 0, -1
		}
		if i > 0 {
			v = (v + 1) << 7
		}
		v |= uint64(c & 0x7f)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, -1
}
