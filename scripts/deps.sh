#!/usr/bin/env bash
# Installs the system packages the tests and the demo need, with apt-get when
# root; otherwise prints the command to run. Extra package names may be given.
set -euo pipefail
need=()
check() { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }
check git git
check rsync rsync
check tmux tmux
check ssh openssh-client
check scp openssh-client
check sftp openssh-client
check ssh-keygen openssh-client
check tput ncurses-bin
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ -x /usr/lib/openssh/sftp-server ] || need+=(openssh-sftp-server)
need+=("$@")
[ ${#need[@]} -eq 0 ] && exit 0
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
