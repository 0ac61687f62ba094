// Package version names the build of the cocoonbox binaries: one string,
// the same for all four, that `--version` prints.
package version

import (
	"runtime/debug"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// stamp is set at link time by `make build`, `make install` and `make dist`
// (.goreleaser.yaml, with GoReleaser's .Summary, the same describe):
// -ldflags "-X github.com/cocoonbox/cocoonbox/internal/version.stamp=$(git describe --tags --always --dirty)".
var stamp string

// String is the build's version: the stamp given at link time (a tag such as
// v0.3.0, or git describe's v0.3.0-4-g1a2b3c4[-dirty] or 1a2b3c4[-dirty]
// where no tag is reachable); else, for a plain `go build` or `go install`,
// the same form made from the module's build information (a release tag as
// go install pkg@v0.3.0 records it, else the VCS revision); else "devel".
func String() string {
	if stamp != "" {
		return stamp
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromBuildInfo(bi)
}

// fromBuildInfo is String's fallback: a describe-like version from what the
// go command recorded in the binary.
func fromBuildInfo(bi *debug.BuildInfo) string {
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	v := bi.Main.Version
	v, plus := strings.CutSuffix(v, "+dirty")
	dirty = dirty || plus
	suffix := ""
	if dirty {
		suffix = "-dirty"
	}
	switch {
	case semver.IsValid(v) && !module.IsPseudoVersion(v):
		// A tagged commit: git describe prints the tag alone.
		return v + suffix
	case module.IsPseudoVersion(v):
		if rev == "" {
			rev, _ = module.PseudoVersionRev(v)
		}
		if base, err := module.PseudoVersionBase(v); err == nil && base != "" {
			// git describe's TAG-N-gREV without the count N, which the
			// pseudo-version does not record.
			return base + "-g" + short(rev) + suffix
		}
	}
	if rev != "" {
		return short(rev) + suffix
	}
	return "devel"
}

// short is a revision cut to git's default abbreviation, seven digits.
func short(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}
