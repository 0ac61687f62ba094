package localbox

// isGroupLeader stands in for the unix call: Windows has no process groups
// to lead.
func isGroupLeader(int) bool { return false }

// CloseInherited does nothing on Windows, where a handle passes to a child
// only when asked for.
func CloseInherited() {}
