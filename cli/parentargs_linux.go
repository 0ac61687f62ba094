package cli

import (
	"os"
	"strconv"
	"strings"
)

// parentArgs is the command line of this process's parent, from
// /proc/PID/cmdline; nil when it cannot be read.
func parentArgs() []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getppid()) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}
