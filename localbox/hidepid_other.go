//go:build !linux

package localbox

// ProcHidesOthers reports true where accounts cannot be served (accounts
// need a Linux local box served by root), so nothing warns about /proc.
func ProcHidesOthers() bool { return true }
