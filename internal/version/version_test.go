package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	const rev = "d4be899c9caf0123456789abcdef0123456789ab"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		// go build in a work tree with no tag (what main printed before: the pseudo-version).
		{"untagged", "v0.0.0-20261130004701-d4be899c9caf", vcs("false"), "d4be899"},
		{"untagged dirty", "v0.0.0-20261130004701-d4be899c9caf+dirty", vcs("true"), "d4be899-dirty"},
		// a commit after tag v0.3.0: Go records v0.3.1-0.TIME-REV.
		{"after a tag", "v0.3.1-0.20261130004701-d4be899c9caf", vcs("false"), "v0.3.0-gd4be899"},
		// go install module/cmd/cocoonbox@v0.3.0 records the tag and no VCS settings.
		{"tag from the module proxy", "v0.3.0", nil, "v0.3.0"},
		{"tagged work tree, dirty", "v0.3.0+dirty", vcs("true"), "v0.3.0-dirty"},
		// go install of a pseudo-version from the proxy: no vcs.revision, the pseudo-version's.
		{"pseudo from the proxy", "v0.0.0-20261130004701-d4be899c9caf", nil, "d4be899"},
		// go build with -buildvcs=false, or a test binary.
		{"no VCS", "(devel)", nil, "devel"},
		{"devel with VCS", "(devel)", vcs("true"), "d4be899-dirty"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/cocoonbox/cocoonbox", Version: tc.version}, Settings: tc.settings}
		if got := fromBuildInfo(bi); got != tc.want {
			t.Errorf("%s: fromBuildInfo(%q) = %q, want %q", tc.name, tc.version, got, tc.want)
		}
	}
}

func TestStampWins(t *testing.T) {
	old := stamp
	t.Cleanup(func() { stamp = old })
	stamp = "v1.2.3-4-gabcdef0-dirty"
	if got := String(); got != stamp {
		t.Errorf("String() = %q with stamp %q", got, stamp)
	}
}
