//go:build unix && !linux && !darwin

package proc

// StartToken is "" where the platform gives no cheap start time: a live
// leader of a recorded group is then taken for the one recorded.
func StartToken(int) string { return "" }

// groupLive reports whether group pgid has a process (signal 0); a
// zombie counts.
func groupLive(pgid int) bool { return SignalGroup(pgid, 0) == nil }

// leaderLive reports whether process pid exists (signal 0).
func leaderLive(pid int) bool { return Alive(pid) }
