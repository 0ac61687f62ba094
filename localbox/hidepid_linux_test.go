package localbox

import "testing"

// The proc mount options as /proc/self/mounts prints them, old and new
// spellings (proc(5)).
func TestHidesPid(t *testing.T) {
	for opts, want := range map[string]bool{
		"rw,nosuid,nodev,noexec,relatime":                   false,
		"rw,relatime,hidepid=2":                             true,
		"rw,nosuid,nodev,noexec,relatime,hidepid=invisible": true,
		"rw,relatime,hidepid=noaccess":                      true,
		"rw,relatime,hidepid=1":                             true,
		"rw,relatime,hidepid=0":                             false,
		"rw,relatime,hidepid=off,subset=pid":                false,
	} {
		if got := hidesPid(opts); got != want {
			t.Errorf("hidesPid(%q) = %v, want %v", opts, got, want)
		}
	}
}
