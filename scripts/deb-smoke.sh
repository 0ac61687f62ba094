#!/usr/bin/env bash
# make deb-smoke (CI, after make dist; root on Debian): installs this
# machine's .deb from dist/ with apt-get as a user would, checks what it
# put where (binaries in /usr/bin, man pages, completions) and what it
# depends on, runs it from /usr/bin against a local box in a throw-away HOME
# (--version, rsh, git ls-remote cocoonbox::…, man -w and man, bash completion of
# `cocoonbox rsh <TAB>` from the installed file), then removes it with
# dpkg -r and checks nothing of it is left; then reads the .rpm with rpm
# (-qlp, --requires). Whatever fails, the trap leaves
# the machine as it was: the box stopped, the package and every package
# this script's apt-get installs removed again, the temporary files gone.
# Environment: VERSION (default: git describe --tags --always --dirty), the
# version the binaries print.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dist=$top/dist
VERSION=${VERSION:-$(git -C "$top" describe --tags --always --dirty)}
fail() { echo "deb-smoke: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "run as root: it installs and removes a package"
command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1 || fail "needs apt-get and dpkg (Debian)"
darch=$(dpkg --print-architecture)
shopt -s nullglob
debs=("$dist"/cocoonbox_*_"$darch".deb)
shopt -u nullglob
[ ${#debs[@]} -eq 1 ] || fail "want one $dist/cocoonbox_*_$darch.deb, found ${#debs[@]}: run make dist first"
deb=${debs[0]}
if dpkg-query -W -f '${Status}' cocoonbox 2>/dev/null | grep -q ' installed$'; then
	fail "a cocoonbox package is installed already; this would remove it: dpkg -r cocoonbox first"
fi
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -y -qq -o DPkg::Lock::Timeout=300 "$@"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cocoonbox-deb.XXXXXX")
# The local box started by root runs box commands as the box user, which
# must reach its state directory.
chmod 711 "$tmp"
# Its own record of which local box holds the box user, gone with it: a
# local box that serves on this machine keeps its claim, and none is left.
export COCOONBOX_CLAIMS_DIR="$tmp/claims"
added=()    # packages this script's apt-get installs, removed on exit
cleanup() {
	set +e
	if [ -x /usr/bin/cocoonbox ]; then
		HOME=$tmp/home XDG_STATE_HOME=$tmp/state /usr/bin/cocoonbox localbox stop >/dev/null 2>&1
	fi
	if dpkg-query -W -f '${Status}' cocoonbox 2>/dev/null | grep -q ' installed$'; then
		echo "deb-smoke: removing cocoonbox" >&2
		dpkg -r cocoonbox >/dev/null
	fi
	local rm=()
	for p in "${added[@]}"; do
		[ "$p" = cocoonbox ] && continue
		dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q ' installed$' && rm+=("$p")
	done
	if [ ${#rm[@]} -gt 0 ]; then
		echo "deb-smoke: removing what it installed: ${rm[*]}" >&2
		apt_get purge "${rm[@]}" >/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# install: what apt-get adds, recorded (a dry run) before it does.
install() {
	local new
	mapfile -t new < <(apt-get -s install -y "$@" | sed -n 's/^Inst \([^ ]*\) .*/\1/p')
	added+=("${new[@]}")
	apt_get install "$@" >/dev/null
}

# The package's own paths, from the .deb, and which of its directories
# this machine has before it is installed (those must stay after dpkg -r).
mapfile -t paths < <(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|; s|/$||' | sed '/^$/d')
predirs=()
for p in "${paths[@]}"; do
	[ -d "$p" ] && predirs+=("$p")
done
echo "deb-smoke: apt-get install -y $deb" >&2
apt_get update >/dev/null
command -v man >/dev/null 2>&1 || install man-db
# The installed completion file is found by bash-completion's loader, as a
# user's shell finds it (the script itself works without the package).
[ -f /usr/share/bash-completion/bash_completion ] || install bash-completion
install "$deb"
dpkg-query -W -f '${Status}' cocoonbox | grep -q ' installed$' || fail "cocoonbox is not installed after apt-get install"
# dpkg -L now, while it is installed: what removal must take away.
mapfile -t listed < <(dpkg -L cocoonbox)
for f in /usr/bin/cocoonbox /usr/bin/cocoonbox-ssh /usr/bin/git-remote-cocoonbox /usr/bin/cocoonbox-agent /usr/bin/cocoonbox-session \
	/usr/share/man/man1/cocoonbox.1 /usr/share/man/man1/cocoonbox-rsh.1 /usr/share/man/man1/cocoonbox-ssh.1 \
	/usr/share/man/man1/git-remote-cocoonbox.1 /usr/share/man/man1/cocoonbox-agent.1 /usr/share/man/man1/cocoonbox-session.1 \
	/usr/share/bash-completion/completions/cocoonbox /usr/share/zsh/vendor-completions/_cocoonbox \
	/usr/share/fish/vendor_completions.d/cocoonbox.fish; do
	printf '%s\n' "${listed[@]}" | grep -qx "$f" || fail "dpkg -L cocoonbox does not list $f"
	[ -f "$f" ] || fail "$f is not installed"
done
for f in /usr/bin/cocoonbox /usr/bin/cocoonbox-ssh /usr/bin/git-remote-cocoonbox /usr/bin/cocoonbox-agent /usr/bin/cocoonbox-session; do
	[ "$(stat -c '%a %U' "$f")" = "755 root" ] || fail "$f is $(stat -c '%a %U' "$f"), want 755 root"
done
other=$(printf '%s\n' "${listed[@]}" | grep -v '^/usr\(/\|$\)' | grep -vx '/\.' || true)
[ -z "$other" ] || fail "the package installs outside /usr: $other"
deps=$(dpkg-query -W -f '${Depends}' cocoonbox)
for d in git rsync openssh-client; do
	grep -Eq "(^|, )$d(\$|,| )" <<<"$deps" || fail "Depends is '$deps': no $d"
done
[ "$(dpkg-query -W -f '${Recommends}' cocoonbox)" = tmux ] || fail "Recommends is '$(dpkg-query -W -f '${Recommends}' cocoonbox)', want tmux"
echo "deb-smoke: installed ${#listed[@]} paths; depends on $deps" >&2

# From /usr/bin, with nothing else of ours on the PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export HOME=$tmp/home XDG_STATE_HOME=$tmp/state
unset XDG_CONFIG_HOME XDG_DATA_HOME COCOONBOX_ENDPOINT COCOONBOX_TOKEN MANPATH
mkdir -p "$HOME" "$XDG_STATE_HOME"
chmod 711 "$HOME" "$XDG_STATE_HOME"
for b in cocoonbox cocoonbox-ssh git-remote-cocoonbox cocoonbox-agent cocoonbox-session; do
	[ "$(command -v "$b")" = "/usr/bin/$b" ] || fail "$b is not /usr/bin/$b: $(command -v "$b")"
	got=$("$b" --version) || fail "$b --version failed"
	[ "$got" = "$b version $VERSION" ] || fail "$b --version printed '$got', want '$b version $VERSION'"
done
for p in cocoonbox cocoonbox-rsh git-remote-cocoonbox; do
	got=$(man -w "$p") || fail "man -w $p failed"
	[ "$got" = "/usr/share/man/man1/$p.1" ] || fail "man -w $p printed '$got', want /usr/share/man/man1/$p.1"
done
# man cocoonbox as a user reads it: formatted, with the page's NAME line.
got=$(MANPAGER=cat MANWIDTH=80 man cocoonbox 2>&1) || fail "man cocoonbox failed: $got"
grep -q '^NAME' <<<"$got" || fail "man cocoonbox shows no NAME section: $(head -3 <<<"$got")"
grep -q '^ *cocoonbox - ' <<<"$got" || fail "man cocoonbox has no 'cocoonbox - ' name line: $(head -5 <<<"$got")"

cocoonbox localbox start >/dev/null
cocoonbox rsh main true || fail "cocoonbox rsh main true exited $?"
code=0
cocoonbox rsh main 'exit 3' || code=$?
[ "$code" -eq 3 ] || fail "cocoonbox rsh main 'exit 3' exited $code, want 3"
got=$(cocoonbox rsh main 'echo "in $PWD"')
[ "$got" = "in $XDG_STATE_HOME/cocoonbox/localbox/boxes/main/workspace" ] || fail "rsh printed '$got', want the box's workspace under $XDG_STATE_HOME"
# A bare repository in the box with one commit on main, made with plumbing.
head=$(cocoonbox rsh main 'git init -q --bare -b main x.git && t=$(git -C x.git mktree </dev/null) &&
	c=$(git -C x.git -c user.name=smoke -c user.email=smoke@example.com commit-tree -m one "$t") &&
	git -C x.git update-ref refs/heads/main "$c" && echo "$c"')
[ ${#head} -eq 40 ] || fail "no commit made in the box: '$head'"
got=$(git ls-remote cocoonbox::main/x)
[ "$got" = "$head	HEAD
$head	refs/heads/main" ] || fail "git ls-remote cocoonbox::main/x printed '$got', want HEAD and refs/heads/main at $head"

# bash completion as a shell gets it: bash-completion's loader finds the
# installed file by the command's name and sources it; the function it
# registers is called as readline would for LINE<TAB>, and it asks the
# installed cocoonbox (for rsh, the local box's boxes).
complete_line() {
	bash --norc --noprofile -c '
		. /usr/share/bash-completion/bash_completion
		declare -F __load_completion >/dev/null || { echo "bash-completion did not load" >&2; exit 1; }
		__load_completion cocoonbox || { echo "bash-completion found no completion for cocoonbox" >&2; exit 1; }
		f=$(complete -p cocoonbox | sed -n "s/.* -F \([^ ]*\) .*/\1/p")
		[ -n "$f" ] || { echo "no completion function for cocoonbox" >&2; exit 1; }
		COMP_LINE=$1 COMP_POINT=${#1} COMP_TYPE=9 COMP_KEY=9
		read -ra COMP_WORDS <<<"$1"
		[[ $1 == *" " ]] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		# compopt works only inside a completion readline started: quiet.
		"$f" cocoonbox "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" \
			2> >(grep -v "compopt: not currently executing completion function" >&2)
		printf "%s\n" "${COMPREPLY[@]}"' complete_line "$1"
}
got=$(complete_line 'cocoonbox rsh ') || fail "bash completion of 'cocoonbox rsh ' failed: $got"
[ "$got" = main ] || fail "cocoonbox rsh <TAB> offered '$got', want main"
got=$(complete_line 'cocoonbox localb') || fail "bash completion of 'cocoonbox localb' failed: $got"
[ "$got" = localbox ] || fail "cocoonbox localb<TAB> offered '$got', want localbox"
cocoonbox localbox stop >/dev/null
echo "deb-smoke: from /usr/bin: --version, man -w, man, a local box, rsh, git ls-remote and bash completion pass" >&2

# Removal: dpkg -r takes every file it listed; a directory stays only if
# the machine had it before.
dpkg -r cocoonbox >/dev/null
! dpkg-query -W -f '${Status}' cocoonbox 2>/dev/null | grep -q ' installed$' || fail "cocoonbox is still installed after dpkg -r"
for p in "${listed[@]}"; do
	[ "$p" = /. ] && continue
	if [ -d "$p" ]; then
		printf '%s\n' "${predirs[@]}" | grep -qx "$p" || fail "dpkg -r left the directory $p, which it made"
	elif [ -e "$p" ] || [ -L "$p" ]; then
		fail "dpkg -r left $p"
	fi
done
echo "deb-smoke: dpkg -r cocoonbox left none of its ${#listed[@]} paths" >&2

# The .rpm for the same architecture, read with Debian's rpm (installed for
# this and removed again): the same files, zsh's in Fedora's
# site-functions, Fedora's dependency names.
case $darch in amd64) rarch=x86_64 ;; arm64) rarch=aarch64 ;; *) rarch=$darch ;; esac
shopt -s nullglob
rpms=("$dist"/cocoonbox-*-1."$rarch".rpm)
shopt -u nullglob
[ ${#rpms[@]} -eq 1 ] || fail "want one $dist/cocoonbox-*-1.$rarch.rpm, found ${#rpms[@]}"
command -v rpm >/dev/null 2>&1 || install rpm
files=$(rpm -qlp "${rpms[0]}" 2>/dev/null) || fail "rpm -qlp ${rpms[0]} failed"
for f in /usr/bin/cocoonbox /usr/bin/cocoonbox-ssh /usr/bin/git-remote-cocoonbox /usr/bin/cocoonbox-agent \
	/usr/share/man/man1/cocoonbox.1 /usr/share/man/man1/git-remote-cocoonbox.1 \
	/usr/share/bash-completion/completions/cocoonbox /usr/share/zsh/site-functions/_cocoonbox \
	/usr/share/fish/vendor_completions.d/cocoonbox.fish; do
	grep -qx "$f" <<<"$files" || fail "${rpms[0]##*/} has no $f"
done
! grep -q vendor-completions <<<"$files" || fail "${rpms[0]##*/} has Debian's zsh vendor-completions"
reqs=$(rpm -qp --requires "${rpms[0]}" 2>/dev/null)
for d in git rsync openssh-clients; do
	grep -qx "$d" <<<"$reqs" || fail "${rpms[0]##*/} does not require $d: $reqs"
done
[ "$(rpm -qp --recommends "${rpms[0]}" 2>/dev/null)" = tmux ] || fail "${rpms[0]##*/} does not recommend tmux"
echo "deb-smoke: ${rpms[0]##*/} has the same files and requires git, rsync, openssh-clients" >&2
