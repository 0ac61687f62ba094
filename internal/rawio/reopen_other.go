//go:build !linux

package rawio

import "os"

// reopenNonblocking is nil: only Linux reopens a pipe through /proc.
func reopenNonblocking(*os.File) *os.File { return nil }
