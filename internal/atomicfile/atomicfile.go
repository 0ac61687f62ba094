// Package atomicfile writes files so that a reader sees the old content or
// the new, never a half-written file.
package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes data to a temporary file beside path with mode perm,
// syncs it, and renames it over path. On error path is unchanged and the
// temporary file is removed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFileWith(path, data, perm, nil)
}

// WriteFileWith is WriteFile that calls prepare, if not nil, with the
// temporary file once written and before the rename, such as to give it
// the owner of the file it replaces; prepare's error leaves path as it
// was.
func WriteFileWith(path string, data []byte, perm os.FileMode, prepare func(*os.File) error) error {
	return write(path, data, perm, prepare, func(tmp string) error {
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("replace %s: %w", path, err)
		}
		return nil
	})
}

// Create is WriteFile for a file that must not exist yet: of two
// processes creating path at once, one wins and the other gets an error
// satisfying errors.Is(err, fs.ErrExist), and path never changes once
// written.
func Create(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, nil, func(tmp string) error {
		// A hard link fails where a file exists, where rename would replace it.
		err := os.Link(tmp, path)
		os.Remove(tmp)
		return err
	})
}

// write writes data to a synced temporary file beside path and calls
// put with its name; the temporary file is removed on error.
func write(path string, data []byte, perm os.FileMode, prepare func(*os.File) error, put func(tmp string) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if err := Fill(f, bytes.NewReader(data), perm, prepare); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := put(f.Name()); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// Fill gives f, a temporary file just made, mode perm and what r reads
// to its end, calls prepare with it if not nil, then syncs and closes it:
// the steps before the rename, for a caller that makes and renames the
// temporary file itself (relative to a directory it holds open, say). f
// is closed whatever the outcome; removing it on error is the caller's.
func Fill(f *os.File, r io.Reader, perm os.FileMode, prepare func(*os.File) error) error {
	err := fill(f, r, perm, prepare)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func fill(f *os.File, r io.Reader, perm os.FileMode, prepare func(*os.File) error) error {
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if prepare != nil {
		if err := prepare(f); err != nil {
			return err
		}
	}
	return f.Sync()
}
