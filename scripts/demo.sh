#!/usr/bin/env bash
# make demo: a local box in a throw-away HOME, and the main jobs run through
# it on real input, each step narrated. Later features add their steps here.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$top/bin:$PATH"
demo=$(mktemp -d /tmp/cocoonbox-demo.XXXXXX)
export HOME="$demo/home"
mkdir -p "$HOME"
unset XDG_CONFIG_HOME XDG_STATE_HOME XDG_DATA_HOME COCOONBOX_ENDPOINT COCOONBOX_TOKEN
cleanup() { cocoonbox localbox stop >/dev/null 2>&1 || true; rm -rf "$demo"; }
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "Start a local box (state under $HOME/.local/state/cocoonbox); it becomes the current endpoint"
run cocoonbox localbox start
run cocoonbox boxes list

step "Run a command in box main, as ssh would: exit status, stdout and stderr kept apart"
run cocoonbox rsh main 'echo "hello from $(hostname) in $PWD"; echo "this went to stderr" >&2; exit 3' || echo "(exit status $?)"

step "Stream real data through it: this repository as a tar archive, unpacked in the box, checked"
printf '$ git -C %s archive HEAD | cocoonbox-ssh main "mkdir -p src && tar x -C src && find src -type f | wc -l"\n' "$top"
git -C "$top" archive HEAD | cocoonbox-ssh main 'mkdir -p src && tar x -C src && find src -type f | wc -l'
echo "(files in HEAD: $(git -C "$top" ls-files | wc -l))"

step "Tools that run ssh as a program run cocoonbox-ssh instead: rsync, git (which probes it with -G), sftp"
run cocoonbox-ssh -G -o SendEnv=GIT_PROTOCOL main
mkdir -p "$demo/up"
git -C "$top" archive HEAD | tar x -C "$demo/up"
run rsync -a --delete -e cocoonbox-ssh "$demo/up/" main:synced/
run rsync -ac --delete --itemize-changes -e cocoonbox-ssh "$demo/up/" main:synced/
echo "(nothing listed: rsync -c finds the copies equal)"
run cocoonbox-ssh main git init -q --bare -b main repo.git
run env GIT_SSH_COMMAND=cocoonbox-ssh git -C "$top" push -q main:repo.git HEAD:refs/heads/main
run env GIT_SSH_COMMAND=cocoonbox-ssh git clone -q main:repo.git "$demo/clone"
run git -C "$demo/clone" log --oneline -1
printf 'ls -1 synced/docs\n' | run sftp -q -b - -S cocoonbox-ssh main

step "Put the box to sleep; the next command wakes it"
run cocoonbox localbox sleep main
run cocoonbox-ssh main 'echo awake again'

step "Stop the local box"
run cocoonbox localbox stop
echo
echo "demo done"
