#!/usr/bin/env bash
# make dist-smoke (CI, after make dist): checks dist/SHA256SUMS, unpacks this
# machine's archive into a temporary prefix as docs/install.md says, and runs
# its binaries from there with nothing else of ours on the PATH (after
# checking every archive holds the four binaries and the docs): --version of
# each (the stamped VERSION), a local box in a throw-away HOME, one rsh, one
# cocoonbox-ssh, one git ls-remote cocoonbox::…, then stops the box.
# Environment: VERSION (default: git describe --tags --always --dirty).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VERSION=${VERSION:-$(git -C "$top" describe --tags --always --dirty)}
os=$(uname -s | tr '[:upper:]' '[:lower:]')
case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) arch=$(uname -m) ;;
esac
name=cocoonbox_${VERSION}_${os}_${arch}
archive=$top/dist/$name.tar.gz
fail() { echo "dist-smoke: $*" >&2; exit 1; }
[ -f "$archive" ] || fail "no $archive: run make dist first"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cocoonbox-smoke.XXXXXX")
prefix=$tmp/prefix
export HOME=$tmp/home
mkdir -p "$prefix" "$HOME"
# Served by root, the local box runs box commands as the box user, which
# must reach its state directory and the binaries.
if [ "$(id -u)" = 0 ]; then chmod 0711 "$tmp" "$HOME"; fi
unset XDG_CONFIG_HOME XDG_STATE_HOME XDG_DATA_HOME COCOONBOX_ENDPOINT COCOONBOX_TOKEN
cleanup() { "$prefix/bin/cocoonbox" localbox stop >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT

echo "dist-smoke: checking SHA256SUMS" >&2
sum=sha256sum
command -v sha256sum >/dev/null 2>&1 || sum='shasum -a 256'
(cd "$top/dist" && $sum --check --quiet SHA256SUMS) || fail "an archive does not match dist/SHA256SUMS"
# Every archive listed holds the four binaries, the man pages and the docs,
# under its name.
while read -r _ a; do
	n=${a%.tar.gz} exe=
	case $n in *_windows_*) exe=.exe ;; esac
	list=$(tar -tzf "$top/dist/$a")
	for f in bin/cocoonbox bin/cocoonbox-ssh bin/git-remote-cocoonbox bin/cocoonbox-agent; do
		grep -qx "$n/$f$exe" <<<"$list" || fail "$a has no $n/$f$exe"
	done
	for f in share/doc/cocoonbox/README.md share/man/man1/cocoonbox.1 share/man/man1/git-remote-cocoonbox.1; do
		grep -qx "$n/$f" <<<"$list" || fail "$a has no $n/$f"
	done
done <"$top/dist/SHA256SUMS"
tar -xzf "$archive" -C "$prefix" --strip-components=1
# Only the archive's binaries: the PATH has none of ./bin, GOPATH/bin or Go.
export PATH="$prefix/bin:/usr/local/bin:/usr/bin:/bin"
for b in cocoonbox cocoonbox-ssh git-remote-cocoonbox cocoonbox-agent; do
	[ "$(command -v "$b")" = "$prefix/bin/$b" ] || fail "$b is not the archive's: $(command -v "$b")"
	got=$("$b" --version) || fail "$b --version failed"
	[ "$got" = "$b version $VERSION" ] || fail "$b --version printed '$got', want '$b version $VERSION'"
done
for f in README.md docs/install.md docs/cocoonbox.md; do
	[ -f "$prefix/share/doc/cocoonbox/$f" ] || fail "the archive has no share/doc/cocoonbox/$f"
done
echo "dist-smoke: the four binaries print $VERSION" >&2

cocoonbox localbox start >/dev/null
got=$(cocoonbox rsh main 'echo "rsh in $PWD"; cocoonbox-agent --version')
want="rsh in $(cd "$HOME" && pwd)/.local/state/cocoonbox/localbox/boxes/main/workspace
cocoonbox-agent version $VERSION"
[ "$got" = "$want" ] || fail "rsh printed '$got', want '$want'"
[ "$(cocoonbox-ssh main echo ssh)" = ssh ] || fail "cocoonbox-ssh main echo ssh printed something else"
cocoonbox rsh main 'git init -q -b main app && git -C app -c user.name=smoke -c user.email=smoke@example.com commit -q --allow-empty -m one'
head=$(cocoonbox rsh main git -C app rev-parse HEAD)
got=$(git ls-remote cocoonbox::main/app)
[ "$got" = "$head	HEAD
$head	refs/heads/main" ] || fail "git ls-remote cocoonbox::main/app printed '$got', want HEAD and refs/heads/main at $head"
cocoonbox localbox stop >/dev/null
echo "dist-smoke: $name: --version, a local box, rsh, cocoonbox-ssh and git ls-remote pass" >&2
