#!/usr/bin/env bash
# Installs the system packages the tests and the demo need, with apt-get when
# root; otherwise prints the command to run. Extra package names may be given.
set -euo pipefail
need=()
check() { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }
check git git
check chromium chromium
check rsync rsync
check tmux tmux
check python3 python3
check npm npm
check ssh openssh-client
check scp openssh-client
check sftp openssh-client
check ssh-keygen openssh-client
check tput ncurses-bin
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ -x /usr/lib/openssh/sftp-server ] || need+=(openssh-sftp-server)
need+=("$@")
# mise (the box half's preflight wants it on the box's PATH) is not a Debian
# package; its npm package ships the binary.
mise_missing() { ! command -v mise >/dev/null 2>&1; }
install_mise() {
	if mise_missing; then
		echo "installing mise (npm @jdxcode/mise)" >&2
		npm install -g --silent @jdxcode/mise >/dev/null
	fi
}
if [ ${#need[@]} -eq 0 ]; then
	if mise_missing; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "mise is missing; install it with:" >&2
			echo "  sudo npm install -g @jdxcode/mise" >&2
			exit 1
		fi
		install_mise
	fi
	exit 0
fi
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ]; then
	echo "missing system packages; install them with:" >&2
	echo "  sudo apt-get install -y ${need[*]}" >&2
	exit 1
fi
echo "installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq "${need[@]}" >/dev/null
install_mise
