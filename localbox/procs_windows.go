package localbox

// The local box runs no commands on Windows (docs/cocoonbox.md): these
// stand in for the unix process-group calls.

func groupAlive(int) bool    { return false }
func procAlive(int) bool     { return false }
func isGroupLeader(int) bool { return false }
func killGroup(int, bool)    {}
func CloseInherited()        {}
