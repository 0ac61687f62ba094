//go:build !linux

package localbox

import "syscall"

// freebind does nothing: container engines run on Linux.
func freebind(_, _ string, _ syscall.RawConn) error { return nil }
