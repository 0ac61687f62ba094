//go:build unix

package cli

import (
	"io/fs"
	"syscall"
)

// fileOwner is fi's owner, group and number of hard links; -1 for the
// owner and group where the system has none to keep.
func fileOwner(fi fs.FileInfo) (uid, gid int, links uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1, 1
	}
	return int(st.Uid), int(st.Gid), uint64(st.Nlink)
}
