//go:build unix

package auth

import (
	"io/fs"
	"os"
)

// checkMode fails with a *ModeError when path has a permission bit want
// lacks: a credentials file others could read is not used.
func checkMode(path string, want fs.FileMode) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&^want != 0 {
		return &ModeError{Path: path, Mode: fi.Mode(), Want: want}
	}
	return nil
}
