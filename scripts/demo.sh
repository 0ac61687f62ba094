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

step "Put the box to sleep; the next command wakes it"
run cocoonbox localbox sleep main
run cocoonbox-ssh main 'echo awake again'

step "Stop the local box"
run cocoonbox localbox stop
echo
echo "demo done"
