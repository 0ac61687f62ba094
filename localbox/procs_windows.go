package localbox

// The local box runs no commands on Windows: these
// stand in for the unix process-group calls.

func groupAlive(int) bool    { return false }
func procAlive(int) bool     { return false }
func isGroupLeader(int) bool { return false }
func killGroup(int, bool)    {}

// CloseInherited does nothing on Windows, where a handle passes to a child
// only when asked for.
func CloseInherited() {}
