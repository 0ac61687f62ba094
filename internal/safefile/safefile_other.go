//go:build !unix

package safefile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// NoFollow is 0: Windows has no O_NOFOLLOW. Nothing there opens a path
// a box user controls: Windows serves no boxes and runs no offload.
const NoFollow = 0

// nonBlock is 0: Windows has no FIFOs that an open waits on.
const nonBlock = 0

// sys is nothing here: without openat, the file is reached by its path
// each time, and no other user's links are in question.
type sys struct{}

func (f *File) open(large bool) error {
	if fi, err := os.Lstat(f.given); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		f.Linked = true
		target, err := filepath.EvalSymlinks(f.given)
		if err != nil {
			return noneIfMissing(err)
		}
		f.Path = target
	}
	h, err := os.Open(f.Path)
	if err != nil {
		return noneIfMissing(err)
	}
	return f.take(h, large)
}

// noneIfMissing is err, or nil when err says the file does not exist:
// open leaves a missing file without Info.
func noneIfMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (f *File) replace(r io.Reader, perm fs.FileMode, prepare func(*os.File) error) error {
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), "."+filepath.Base(f.Path)+".tmp*")
	if err != nil {
		return err
	}
	if err := atomicfile.Fill(tmp, r, perm, prepare); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	// Windows cannot replace a file another handle holds open.
	if f.Body != nil {
		f.Body.Close()
		f.Body = nil
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

func (f *File) remove() error { return os.Remove(f.Path) }

func (f *File) close() error { return nil }
