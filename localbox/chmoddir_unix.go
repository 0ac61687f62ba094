//go:build unix

package localbox

import (
	"os"
	"syscall"
)

// chmodDir sets directory d's mode to perm through a descriptor opened
// without following a link at d.
func chmodDir(d string, perm os.FileMode) error {
	f, err := os.OpenFile(d, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(perm)
}
