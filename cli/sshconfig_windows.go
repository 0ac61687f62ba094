package cli

import "io/fs"

// fileOwner is fi's owner, group and number of hard links: Windows has
// no owner a replace changes that we can keep, so -1, -1; and links are
// not counted here, so 1.
func fileOwner(fs.FileInfo) (uid, gid int, links uint64) { return -1, -1, 1 }
