//go:build !linux

package boxsession

import "os"

// takeRequests makes nothing: the shell's way in takes the Exec's
// streams from /proc (Linux's); attachers alone reach the holder.
func (h *Holder) takeRequests(dir string) (stop func()) { return nil }

// awaitExit is Linux's only (pidfds); no link has one elsewhere.
func awaitExit(*os.File) bool { return false }

// endShell is Linux's only (pidfds).
func endShell(*os.File) {}
