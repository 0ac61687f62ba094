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

step "git through the box: this project's history pushed to a bare repository in box main with git-remote-cocoonbox, cloned back, the two logs compared"
if git -C "$top" rev-parse --verify -q HEAD >/dev/null; then
  run cocoonbox rsh main git init -q --bare -b main cocoonbox.git
  if [ "$(git -C "$top" rev-parse --is-shallow-repository)" = true ]; then
    # A shallow checkout (as CI makes) can only be pushed where that is allowed.
    run cocoonbox rsh main git -C cocoonbox.git config receive.shallowUpdate true
  fi
  printf '$ git -C %s push cocoonbox::main/cocoonbox.git HEAD:refs/heads/main\n' "$top"
  git -C "$top" push cocoonbox::main/cocoonbox.git HEAD:refs/heads/main
  have_repo=1
  run git clone cocoonbox::main/cocoonbox.git "$demo/clone"
  git -C "$top" log --format='%H %an %s' HEAD >"$demo/here.log"
  git -C "$demo/clone" log --format='%H %an %s' HEAD >"$demo/back.log"
  printf '$ diff <(git -C %s log) <(git -C %s log)\n' "$top" "$demo/clone"
  if diff "$demo/here.log" "$demo/back.log"; then
    echo "the same $(wc -l <"$demo/here.log") commits, byte for byte"
  else
    echo "the histories differ" >&2
    exit 1
  fi
else
  echo "(skipped: $top is not a git checkout with commits)"
fi
step "Tools that run ssh as a program run cocoonbox-ssh instead: rsync, git (which probes it with -G), sftp"
run cocoonbox-ssh -G -o SendEnv=GIT_PROTOCOL main
mkdir -p "$demo/up"
git -C "$top" archive HEAD | tar x -C "$demo/up"
run rsync -a --delete -e cocoonbox-ssh "$demo/up/" main:synced/
run rsync -ac --delete --itemize-changes -e cocoonbox-ssh "$demo/up/" main:synced/
echo "(nothing listed: rsync -c finds the copies equal)"
if [ -n "${have_repo:-}" ]; then
  run env GIT_SSH_COMMAND=cocoonbox-ssh git clone -q main:cocoonbox.git "$demo/clone-ssh"
  run git -C "$demo/clone-ssh" log --oneline -1
fi
printf 'ls -1 synced/docs\n' | run sftp -q -b - -S cocoonbox-ssh main

step "Put the box to sleep; the next command wakes it"
run cocoonbox localbox sleep main
run cocoonbox-ssh main 'echo awake again'

step "Stop the local box"
run cocoonbox localbox stop
echo
echo "demo done"
