#!/usr/bin/env bash
# Installs what `make demo` or `make test` needs: system packages with
# apt-get, and mise with npm (the box half's preflight wants it on a box's
# PATH; it is no Debian package), when run as root; otherwise prints the
# commands to run. Usage: scripts/deps.sh [demo|test] [more Debian packages].
# scripts/deps.sh dist: GoReleaser for make dist, at the version pinned here,
# with go install into $(go env GOPATH)/bin (as any user; Go builds it).
set -euo pipefail
# GoReleaser's version (.goreleaser.yaml is written for it). v2.18 and later
# do not build with the Go here.
GORELEASER_VERSION=v2.15.1
if [ "${1:-}" = dist ]; then
	GO=${GO:-go}
	bin=$("$GO" env GOPATH)/bin
	# go install records the module's version, which --version prints.
	if [ -x "$bin/goreleaser" ] && "$bin/goreleaser" --version 2>/dev/null | grep -qw "${GORELEASER_VERSION#v}\|$GORELEASER_VERSION"; then
		exit 0
	fi
	echo "installing goreleaser $GORELEASER_VERSION into $bin (go install; minutes on a first build)" >&2
	GOBIN=$bin "$GO" install "github.com/goreleaser/goreleaser/v2@$GORELEASER_VERSION"
	exit 0
fi
profile=test
case "${1:-}" in demo|test) profile=$1; shift ;; esac
need=()
check() { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }
check git git
check rsync rsync
check tmux tmux
check python3 python3
check npm npm
check ssh openssh-client
check sftp openssh-client
# The demo's sftp step runs the box's sftp-server, where Debian puts it.
[ -x /usr/lib/openssh/sftp-server ] || need+=(openssh-sftp-server)
check tput ncurses-bin
# The rest of what the demo's steps run, here and in the box: part of every
# Debian, checked so a trimmed image names them too.
for p in tar:tar find:findutils diff:diffutils sed:sed hostname:hostname; do check "${p%%:*}" "${p#*:}"; done
if [ "$profile" = test ]; then
	check chromium chromium
	check scp openssh-client
	check ssh-keygen openssh-client
	check curl curl
	[ -x /usr/sbin/sshd ] || need+=(openssh-server)
	# Debian's own python3 for Paramiko, whatever python3 is first on the PATH.
	/usr/bin/python3 -c 'import paramiko' >/dev/null 2>&1 || need+=(python3-paramiko)
	# asyncssh's SFTP client, whose symlink order depends on the server's version line.
	/usr/bin/python3 -c 'import asyncssh' >/dev/null 2>&1 || need+=(python3-asyncssh)
	# mosh over the shim and over ssh (cli/mosh_unix_test.go): the client here,
	# and mosh-server in the tests' local boxes, which run on this machine.
	check mosh mosh
	check mosh-server mosh
	# The container engine's tests (cli TestEngineScripts, which .ci/run
	# turns on): Debian's docker engine, and debootstrap for the box image.
	check dockerd docker.io
	check debootstrap debootstrap
	check script bsdutils
	# cocoonbox-ssh --stdio run by socat's EXEC, as rclone's docs run a custom
	# ssh (cli/sshstdio_socat_test.go).
	check socat socat
	# PuTTY's SFTP clients through --stdio (cli/sshstdio_sftp_test.go).
	check pscp putty-tools
	check psftp putty-tools
fi
need+=("$@")
mise=$(command -v mise >/dev/null 2>&1 && echo yes || echo no)
# The real Claude Code and Codex CLIs the realcli tests run in a local box,
# pinned in cli/testdata/realcli/versions, installed once per machine with
# npm (each box links them into its ~/.local/bin). As root they go under
# /opt and the box user `user` (the contract's, uid 1000 when free) is made,
# since the tests' local box runs box commands as it; otherwise under
# ~/.cache. COCOONBOX_TEST_CLIS overrides the directory.
root=$([ "$(id -u)" -eq 0 ] && echo yes || echo no)
if [ "$root" = yes ]; then clis=${COCOONBOX_TEST_CLIS:-/opt/cocoonbox-test/clis}; else clis=${COCOONBOX_TEST_CLIS:-$HOME/.cache/cocoonbox-test/clis}; fi
versions="$(dirname "$0")/../cli/testdata/realcli/versions"
clis_missing=()
if [ "$profile" = test ] && [ -f "$versions" ]; then
	while read -r kind pkg ver; do
		case "$kind" in ''|'#'*) continue ;; esac
		[ -x "$clis/$kind@$ver/bin/$kind" ] || clis_missing+=("$kind $pkg $ver")
	done <"$versions"
fi
boxuser=yes
[ "$profile" = test ] && [ "$root" = yes ] && ! id -u user >/dev/null 2>&1 && boxuser=no
if [ ${#need[@]} -eq 0 ] && [ "$mise" = yes ] && [ ${#clis_missing[@]} -eq 0 ] && [ "$boxuser" = yes ]; then
	if [ "$profile" = test ]; then
		echo "deps.sh: the tests' programs, packages, pinned coding-agent CLIs and box user are all here" >&2
	else
		echo "deps.sh: the demo's programs are all here" >&2
	fi
	exit 0
fi
mapfile -t need < <(printf '%s\n' "${need[@]}" | sed '/^$/d' | sort -u)
install_clis() {
	for c in "${clis_missing[@]}"; do
		read -r kind pkg ver <<<"$c"
		echo "installing $pkg@$ver into $clis/$kind@$ver (npm)" >&2
		rm -rf "$clis/$kind@$ver.tmp"
		mkdir -p "$clis"
		npm install -g --silent --no-fund --no-audit --prefix "$clis/$kind@$ver.tmp" "$pkg@$ver" >/dev/null
		"$clis/$kind@$ver.tmp/bin/$kind" --version >/dev/null
		mv "$clis/$kind@$ver.tmp" "$clis/$kind@$ver"
	done
}
if [ "$root" = no ] && [ ${#need[@]} -eq 0 ] && [ "$mise" = yes ]; then
	install_clis
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "missing for make $profile; install with:" >&2
	[ ${#need[@]} -gt 0 ] && echo "  sudo apt-get install -y ${need[*]}" >&2
	[ "$mise" = no ] && echo "  sudo npm install -g @jdxcode/mise" >&2
	exit 1
fi
# Another apt or dpkg (unattended-upgrades, a second deps.sh) may hold
# the package locks for a while: apt-get install waits up to lock_wait
# seconds for dpkg's (DPkg::Lock::Timeout), and apt-get update, which
# waits for no lock of its own (apt 2.6), is tried again every 5 s as
# long.
lock_wait=600
apt_update() {
	local err i
	for ((i = 0; i * 5 < lock_wait; i++)); do
		if err=$(apt-get -o DPkg::Lock::Timeout=$lock_wait update -qq 2>&1 >/dev/null); then
			return 0
		fi
		case $err in *"Could not get lock"*) ;; *) break ;; esac
		[ $i -eq 0 ] && echo "deps.sh: another apt-get holds the package lists' lock; waiting up to $lock_wait s" >&2
		sleep 5
	done
	printf '%s\n' "$err" >&2
	return 1
}
if [ ${#need[@]} -gt 0 ]; then
	echo "installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt_update
	apt-get -o DPkg::Lock::Timeout=$lock_wait install -y -qq "${need[@]}" >/dev/null
fi
if [ "$mise" = no ]; then
	echo "installing mise (npm @jdxcode/mise)" >&2
	npm install -g --silent @jdxcode/mise >/dev/null
fi
if [ "$boxuser" = no ]; then
	echo "making the box user: useradd user" >&2
	if getent passwd 1000 >/dev/null; then useradd -m -s /bin/bash user; else useradd -m -u 1000 -s /bin/bash user; fi
fi
install_clis
