package localbox

import (
	"bufio"
	"os"
	"strings"
)

// ProcHidesOthers reports whether /proc is mounted with hidepid
// (invisible or 2, or noaccess or 1), so that one account's box users
// cannot read another's command lines with ps (proc(5), "Mount
// options"). It reads /proc/self/mounts; an error reading it counts as
// not hidden.
func ProcHidesOthers() bool {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	hidden := false
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 || fs[1] != "/proc" || fs[2] != "proc" {
			continue
		}
		// The last mount on /proc is the one seen.
		hidden = hidesPid(fs[3])
	}
	return hidden
}

// hidesPid reports whether a proc mount's options (comma separated, as
// in /proc/self/mounts) hide other users' processes' command lines.
func hidesPid(opts string) bool {
	for _, o := range strings.Split(opts, ",") {
		switch o {
		case "hidepid=1", "hidepid=2", "hidepid=noaccess", "hidepid=invisible":
			return true
		}
	}
	return false
}
