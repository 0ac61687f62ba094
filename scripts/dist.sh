#!/usr/bin/env bash
# make dist: release archives in dist/. For each target a
# cocoonbox_VERSION_OS_ARCH.tar.gz holding one directory of that name with
# bin/ (the four binaries), share/man/man1/ (their man pages) and
# share/doc/cocoonbox/ (README.md, docs/), so
# `tar -xzf ARCHIVE -C PREFIX --strip-components=1` installs into PREFIX;
# then dist/SHA256SUMS. Builds are -trimpath, CGO_ENABLED=0, and the archives
# carry the commit's time and no owner, so the same commit and Go give the
# same bytes. Needs GNU tar (TAR=gtar on a Mac: brew install gnu-tar).
# Environment: VERSION (default: git describe --tags --always --dirty),
# DIST_TARGETS (default: every release target), GO, TAR.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
GO=${GO:-go}
TAR=${TAR:-tar}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || true)}
targets=${DIST_TARGETS:-darwin/arm64 darwin/amd64 linux/amd64 linux/arm64 windows/amd64}
if [ -z "$VERSION" ]; then
	echo "dist: no version: run make dist in a git checkout, or set VERSION=v1.2.3" >&2
	exit 1
fi
case $VERSION in
*[!A-Za-z0-9._+-]*)
	echo "dist: version $VERSION has characters a file name should not: use letters, digits, . _ + -" >&2
	exit 1
	;;
esac
if ! "$TAR" --version 2>/dev/null | grep -q 'GNU tar'; then
	echo "dist: $TAR is not GNU tar, which the reproducible archives need: install it (macOS: brew install gnu-tar) and run with TAR=gtar" >&2
	exit 1
fi
# The archives' times: the commit's, so a rebuild of it is byte-identical.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

stage=$(mktemp -d "${TMPDIR:-/tmp}/cocoonbox-dist.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p dist
rm -f dist/cocoonbox_*.tar.gz dist/SHA256SUMS
# The man pages are the same for every target: made once, on this machine.
"$GO" run ./internal/genman "$stage/man1"

for t in $targets; do
	os=${t%/*} arch=${t#*/}
	name=cocoonbox_${VERSION}_${os}_${arch}
	root=$stage/$name
	mkdir -p "$root/bin" "$root/share/doc/cocoonbox" "$root/share/man"
	echo "dist: building $name" >&2
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath \
		-ldflags "-s -w -X github.com/cocoonbox/cocoonbox/internal/version.stamp=$VERSION" \
		-o "$root/bin/" ./cmd/...
	cp -R "$stage/man1" "$root/share/man/"
	cp README.md "$root/share/doc/cocoonbox/"
	cp -R docs "$root/share/doc/cocoonbox/"
	"$TAR" --sort=name --format=gnu --owner=0 --group=0 --numeric-owner \
		--mtime="@$epoch" --mode='u+rwX,go+rX,go-w' -C "$stage" -cf - "$name" |
		gzip -9n >"dist/$name.tar.gz"
done
# sha256sum's lines, which shasum -a 256 (a Mac's) writes alike.
sum=sha256sum
command -v sha256sum >/dev/null 2>&1 || sum='shasum -a 256'
(cd dist && $sum cocoonbox_*.tar.gz >SHA256SUMS)
echo "dist: $(ls dist/cocoonbox_*.tar.gz | wc -l) archives and SHA256SUMS in $top/dist" >&2
