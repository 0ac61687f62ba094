//go:build unix && !linux

package localbox

import (
	"os/exec"
	"strconv"
)

// killUserOnce sends SIGKILL to every process of uid with pkill(1) and
// reports whether it found any (pkill exits 1 when it matched nothing).
func killUserOnce(uid uint32) bool {
	err := exec.Command("pkill", "-KILL", "-U", strconv.FormatUint(uint64(uid), 10)).Run()
	ee, ok := err.(*exec.ExitError)
	return !ok || ee.ExitCode() != 1
}
