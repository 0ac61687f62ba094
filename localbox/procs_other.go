//go:build !linux && !darwin

package localbox

// startToken is "" where the platform gives no cheap start time: a live
// recorded pid is then taken as ours when it still leads its group.
func startToken(int) string { return "" }

// exited reports whether pid is gone.
func exited(pid int) bool { return !procAlive(pid) }
