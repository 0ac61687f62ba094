#!/usr/bin/env bash
# make vet's other platforms: for each GOOS/GOARCH named, go build of every
# package but the mains, then go vet (tests included) of the packages whose files there
# differ from this machine's platform's. The platforms run in parallel;
# the first failure fails the whole. Usage: scripts/vet-platforms.sh
# GOOS/GOARCH... (PACKAGES, default ./..., and GO as make's).
set -uo pipefail
GO=${GO:-go}
PACKAGES=${PACKAGES:-./...}
files() {
	GOOS=$1 GOARCH=$2 "$GO" list -f '{{.ImportPath}} {{.GoFiles}} {{.CgoFiles}} {{.TestGoFiles}} {{.XTestGoFiles}}' $PACKAGES
}
host=$(files "$("$GO" env GOOS)" "$("$GO" env GOARCH)") || exit 1
one() {
	local os=${1%/*} arch=${1#*/} differ
	# Not the mains (cmd/: one call into cli each, the same on every
	# platform): linking them is most of a build's CPU.
	local libs
	libs=$(GOOS=$os GOARCH=$arch "$GO" list -f '{{if and .GoFiles (ne .Name "main")}}{{.ImportPath}}{{end}}' $PACKAGES) || return 1
	echo "go build (every package but the mains) ($1)"
	GOOS=$os GOARCH=$arch "$GO" build $libs || return 1
	differ=$(diff <(echo "$host") <(files "$os" "$arch") | sed -n 's/^> \([^ ]*\) .*/\1/p')
	if [ -z "$differ" ]; then
		echo "go vet ($1): no package differs from the host's"
		return 0
	fi
	echo "go vet ($1):" $differ
	GOOS=$os GOARCH=$arch "$GO" vet $differ
}
pids=()
for p in "$@"; do
	one "$p" &
	pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do
	wait "$pid" || rc=1
done
exit $rc
