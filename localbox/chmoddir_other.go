//go:build !unix

package localbox

import "os"

// chmodDir sets directory d's mode to perm (no container engine serves
// boxes here).
func chmodDir(d string, perm os.FileMode) error { return os.Chmod(d, perm) }
