package share

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstShortDir: the socket names ControlSocket gives are as long as
// the one FirstShortDir measures with, and it skips a directory whose
// sockets would not fit a socket address.
func TestFirstShortDir(t *testing.T) {
	if got := filepath.Base(ControlSocket("/d", "https://box.example:443", "", "key")); len(got) != len(sockName) {
		t.Errorf("socket name %q is %d bytes, FirstShortDir measures %d", got, len(got), len(sockName))
	}
	// The longest that fits: long/sockName is maxSocketPath bytes.
	long := "/" + strings.Repeat("x", maxSocketPath-len(sockName)-2)
	for _, tc := range []struct {
		dirs []string
		want string
	}{
		{[]string{"/run/user/1000/cocoonbox/control", "/tmp/c"}, "/run/user/1000/cocoonbox/control"},
		{[]string{long + "y", "/tmp/c"}, "/tmp/c"},
		{[]string{long}, long},
	} {
		if got, err := FirstShortDir(tc.dirs); err != nil || got != tc.want {
			t.Errorf("FirstShortDir(%q) = %q, %v, want %q", tc.dirs, got, err, tc.want)
		}
	}
	if _, err := FirstShortDir([]string{long + "y"}); err == nil {
		t.Error("FirstShortDir of a directory too long: no error")
	}
}
