#!/usr/bin/env bash
# make dist-smoke (CI, after make dist): checks dist/SHA256SUMS against every
# file it lists and that dist/ holds the five archives and four packages
# .goreleaser.yaml makes; that every archive holds the four binaries, the
# man pages, the three completions and the docs under its directory; that
# dist/homebrew/Formula/cocoonbox.rb parses (ruby -c) and names the
# archives by their SHA256SUMS lines; that the archive's entries carry the
# commit's time and the binaries no build path. Then it unpacks this machine's archive
# into a temporary prefix as docs/install.md says and runs its binaries
# from there with nothing else of ours on the PATH: --version of each (the
# stamped VERSION), a local box in a throw-away HOME, one rsh, one
# cocoonbox-ssh, one git ls-remote cocoonbox::…, then stops the box.
# Without ruby: as root on Debian it installs it with apt-get for the check
# and removes it after; otherwise it says what to install.
# Environment: VERSION (default: git describe --tags --always --dirty), the
# version the binaries print.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dist=$top/dist
VERSION=${VERSION:-$(git -C "$top" describe --tags --always --dirty)}
os=$(uname -s | tr '[:upper:]' '[:lower:]')
case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) arch=$(uname -m) ;;
esac
fail() { echo "dist-smoke: $*" >&2; exit 1; }
[ -f "$dist/SHA256SUMS" ] || fail "no $dist/SHA256SUMS: run make dist first"
[ -f "$dist/metadata.json" ] || fail "no $dist/metadata.json: run make dist first"
# The version in the file names: the tag without its v, or the snapshot's.
fversion=$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' "$dist/metadata.json")
[ -n "$fversion" ] || fail "no version in $dist/metadata.json"
name=cocoonbox_${fversion}_${os}_${arch}
archive=$dist/$name.tar.gz

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cocoonbox-smoke.XXXXXX")
prefix=$tmp/prefix
export HOME=$tmp/home
mkdir -p "$prefix" "$HOME"
# Served by root, the local box runs box commands as the box user, which
# must reach its state directory and the binaries.
if [ "$(id -u)" = 0 ]; then chmod 0711 "$tmp" "$HOME"; fi
unset XDG_CONFIG_HOME XDG_STATE_HOME XDG_DATA_HOME COCOONBOX_ENDPOINT COCOONBOX_TOKEN
# Its own record of which local box holds the box user, gone with it: a
# local box that serves on this machine keeps its claim, and none is left.
export COCOONBOX_CLAIMS_DIR="$tmp/claims"
installed_ruby=()
cleanup() {
	"$prefix/bin/cocoonbox" localbox stop >/dev/null 2>&1 || true
	rm -rf "$tmp"
	if [ ${#installed_ruby[@]} -gt 0 ]; then
		echo "dist-smoke: removing what it installed for ruby -c: ${installed_ruby[*]}" >&2
		DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq -o DPkg::Lock::Timeout=300 "${installed_ruby[@]}" >/dev/null || true
	fi
}
trap cleanup EXIT

echo "dist-smoke: checking SHA256SUMS" >&2
sum=sha256sum
command -v sha256sum >/dev/null 2>&1 || sum='shasum -a 256'
(cd "$dist" && $sum --check --quiet SHA256SUMS) || fail "a file does not match dist/SHA256SUMS"
# What a release attaches, each listed once in SHA256SUMS.
listed=$(awk '{print $2}' "$dist/SHA256SUMS" | sort)
# The packages' version: a snapshot's -dev.gHASH is a pre-release, ~dev.gHASH.
pv=${fversion/-/\~}
want=$(printf '%s\n' \
	"cocoonbox_${fversion}_darwin_amd64.tar.gz" "cocoonbox_${fversion}_darwin_arm64.tar.gz" \
	"cocoonbox_${fversion}_linux_amd64.tar.gz" "cocoonbox_${fversion}_linux_arm64.tar.gz" \
	"cocoonbox_${fversion}_windows_amd64.zip" \
	"cocoonbox_${pv}_amd64.deb" "cocoonbox_${pv}_arm64.deb" \
	"cocoonbox-${pv}-1.x86_64.rpm" "cocoonbox-${pv}-1.aarch64.rpm" | sort)
[ "$listed" = "$want" ] || fail "SHA256SUMS lists
$listed
want
$want"

# Every archive holds the four binaries, the man pages, the completions and
# the docs, under its name.
while read -r _ a; do
	case $a in
	*.tar.gz) n=${a%.tar.gz} exe= list=$(tar -tzf "$dist/$a") ;;
	*.zip) n=${a%.zip} exe=.exe list=$(python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$dist/$a") ;;
	*) continue ;;
	esac
	for f in bin/cocoonbox bin/cocoonbox-ssh bin/git-remote-cocoonbox bin/cocoonbox-agent bin/cocoonbox-session; do
		grep -qx "$n/$f$exe" <<<"$list" || fail "$a has no $n/$f$exe"
	done
	for f in share/doc/cocoonbox/README.md share/doc/cocoonbox/docs/install.md \
		share/man/man1/cocoonbox.1 share/man/man1/cocoonbox-rsh.1 share/man/man1/cocoonbox-ssh.1 \
		share/man/man1/git-remote-cocoonbox.1 share/man/man1/cocoonbox-agent.1 share/man/man1/cocoonbox-session.1 \
		share/bash-completion/completions/cocoonbox share/zsh/site-functions/_cocoonbox \
		share/fish/vendor_completions.d/cocoonbox.fish; do
		grep -qx "$n/$f" <<<"$list" || fail "$a has no $n/$f"
	done
	other=$(grep -v "^$n/" <<<"$list" || true)
	[ -z "$other" ] || fail "$a has entries outside $n/: $other"
done <"$dist/SHA256SUMS"
echo "dist-smoke: SHA256SUMS, 5 archives and 4 packages; each archive is complete" >&2

# Reproducible: every entry of this machine's archive carries the commit's
# time, and no binary holds the path it was built in (-trimpath).
ctime=$(git -C "$top" log -1 --format=%ct)
times=$(python3 -c 'import sys, tarfile; print("\n".join(sorted({str(int(m.mtime)) for m in tarfile.open(sys.argv[1])})))' "$archive")
[ "$times" = "$ctime" ] || fail "$archive has entries with other times than the commit's ($ctime): $(tr '\n' ' ' <<<"$times")"
while read -r b; do
	if grep -qF "$top" "$b"; then fail "$b holds the build path $top"; fi
done < <(find "$dist" -type f -path '*_linux_amd64*/bin/*')
echo "dist-smoke: the archive's entries have the commit's time; the binaries hold no build path" >&2

# The formula: Ruby that parses, and a url and sha256 for each of the four
# macOS and Linux archives, as SHA256SUMS has them.
formula=$dist/homebrew/Formula/cocoonbox.rb
[ -f "$formula" ] || fail "no $formula"
if ! command -v ruby >/dev/null 2>&1; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq -o DPkg::Lock::Timeout=300 >/dev/null
		# Exactly what this install adds, to remove it again on exit.
		mapfile -t installed_ruby < <(apt-get -s install -y ruby | sed -n 's/^Inst \([^ ]*\) .*/\1/p')
		echo "dist-smoke: installing ruby for ruby -c (${#installed_ruby[@]} packages, removed on exit)" >&2
		apt-get install -y -qq -o DPkg::Lock::Timeout=300 ruby >/dev/null
	else
		fail "no ruby for ruby -c on the formula: install it (Debian: sudo apt-get install ruby)"
	fi
fi
got=$(ruby -c "$formula") || fail "ruby -c $formula failed: $got"
[ "$got" = "Syntax OK" ] || fail "ruby -c $formula printed '$got'"
pairs=$(sed -n 's/^ *url "\(.*\)".*/url \1/p; s/^ *sha256 "\(.*\)".*/sha256 \1/p' "$formula")
n=0 url=
while read -r kind v; do
	case $kind in
	url) url=$v ;;
	sha256)
		[ -n "$url" ] || fail "the formula has a sha256 before any url"
		f=${url##*/}
		case $url in "https://github.com/cocoonbox/cocoonbox/releases/download/"*/"$f") ;; *) fail "the formula's url $url is not a release download" ;; esac
		line=$(awk -v f="$f" '$2 == f' "$dist/SHA256SUMS")
		[ -n "$line" ] || fail "the formula's $f is not in SHA256SUMS"
		[ "${line%% *}" = "$v" ] || fail "the formula's sha256 for $f is $v, SHA256SUMS says ${line%% *}"
		n=$((n + 1)) url=
		;;
	esac
done <<<"$pairs"
[ "$n" -eq 4 ] || fail "the formula names $n archives, want 4 (macOS and Linux, amd64 and arm64)"
grep -q 'depends_on "rsync"' "$formula" || fail "the formula does not depend on rsync"
for f in '"bin/cocoonbox"' '"bin/git-remote-cocoonbox"' 'man1.install' 'bash_completion.install' 'zsh_completion.install' 'fish_completion.install'; do
	grep -qF "$f" "$formula" || fail "the formula does not install $f"
done
echo "dist-smoke: the formula parses and names the 4 archives with their SHA256SUMS" >&2

[ -f "$archive" ] || fail "no $archive"
tar -xzf "$archive" -C "$prefix" --strip-components=1
# Only the archive's binaries: the PATH has none of ./bin, GOPATH/bin or Go.
export PATH="$prefix/bin:/usr/local/bin:/usr/bin:/bin"
for b in cocoonbox cocoonbox-ssh git-remote-cocoonbox cocoonbox-agent cocoonbox-session; do
	[ "$(command -v "$b")" = "$prefix/bin/$b" ] || fail "$b is not the archive's: $(command -v "$b")"
	got=$("$b" --version) || fail "$b --version failed"
	[ "$got" = "$b version $VERSION" ] || fail "$b --version printed '$got', want '$b version $VERSION'"
done
for f in README.md docs/install.md docs/cocoonbox.md; do
	[ -f "$prefix/share/doc/cocoonbox/$f" ] || fail "the archive has no share/doc/cocoonbox/$f"
done
# man finds the pages from bin/ on the PATH (man-db's ../share/man).
if command -v man >/dev/null 2>&1; then
	got=$(env -u MANPATH man -w cocoonbox 2>/dev/null || true)
	[ "$got" = "$prefix/share/man/man1/cocoonbox.1" ] || fail "man -w cocoonbox printed '$got', want $prefix/share/man/man1/cocoonbox.1"
fi
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
