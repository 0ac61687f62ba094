#!/usr/bin/env bash
# make demo: a local box in a throw-away HOME, and the main jobs run through
# it on real input, each step narrated. Later features add their steps here.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# Before the first step: every program a step runs, here and in the box
# (scripts/deps.sh demo installs them as root, else names them), and ours.
"$top/scripts/deps.sh" demo
for b in cocoonbox cocoonbox-ssh git-remote-cocoonbox cocoonbox-agent; do
  [ -x "$top/bin/$b" ] || { echo "demo: $top/bin/$b is missing; run make demo, which builds it" >&2; exit 1; }
done
export PATH="$top/bin:$PATH"
demo=$(mktemp -d /tmp/cocoonbox-demo.XXXXXX)
# Run as root, the local box gives its commands the unprivileged user
# `user`, who must be able to pass through (not list) the throw-away
# directory to reach the box's state and the binaries.
if [ "$(id -u)" = 0 ]; then chmod 0711 "$demo"; fi
export HOME="$demo/home"
mkdir -p "$HOME"
unset XDG_CONFIG_HOME XDG_STATE_HOME XDG_DATA_HOME COCOONBOX_ENDPOINT COCOONBOX_TOKEN
# Its own record of which local box holds the box user, gone with it: a
# local box that serves on this machine keeps its claim, and none is left.
export COCOONBOX_CLAIMS_DIR="$demo/claims"
cleanup() { cocoonbox localbox stop >/dev/null 2>&1 || true; rm -rf "$demo"; }
trap cleanup EXIT

# Bold only on a terminal: a file or a pipe gets the plain text.
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold= plain=; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
# show prints a command as it would be typed: words with shell characters
# single-quoted, so a line pasted from the transcript runs the same.
show() {
  local out='$' w q="'" e="'\\''"
  for w in "$@"; do
    if [[ $w =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then out+=" $w"; else out+=" '${w//$q/$e}'"; fi
  done
  printf '%s\n' "$out"
}
run() { show "$@"; "$@"; }
# note is the demo's own remark on what a step showed, marked as the
# demo's so that it cannot be read as the last command's output.
note() { printf '%s[demo] %s%s\n' "$bold" "$*" "$plain"; }

step "Start a local box (state under $HOME/.local/state/cocoonbox); it becomes the current endpoint"
run cocoonbox localbox start
run cocoonbox boxes list

step "Run a command in box main, as ssh would: exit status, stdout and stderr kept apart"
run cocoonbox rsh main 'echo "hello from $(hostname) in $PWD"; echo "this went to stderr" >&2; exit 3' || note "exit status $?"

step "Stream real data through it: this repository as a tar archive, unpacked in the box, checked"
printf '$ git -C %s archive HEAD | cocoonbox-ssh main "mkdir -p src && tar x -C src && find src -type f | wc -l"\n' "$top"
git -C "$top" archive HEAD | cocoonbox-ssh main 'mkdir -p src && tar x -C src && find src -type f | wc -l'
note "files in HEAD: $(git -C "$top" ls-files | wc -l)"

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
  note "skipped: $top is not a git checkout with commits"
fi
step "Tools that run ssh as a program run cocoonbox-ssh instead: rsync, git (which probes it with -G), sftp"
run cocoonbox-ssh -G -o SendEnv=GIT_PROTOCOL main
mkdir -p "$demo/up"
git -C "$top" archive HEAD | tar x -C "$demo/up"
run rsync -a --delete -e cocoonbox-ssh "$demo/up/" main:synced/
run rsync -ac --delete --itemize-changes -e cocoonbox-ssh "$demo/up/" main:synced/
note "rsync listed nothing: with -c it finds the copies equal"
if [ -n "${have_repo:-}" ]; then
  run env GIT_SSH_COMMAND=cocoonbox-ssh git clone -q main:cocoonbox.git "$demo/clone-ssh"
  run git -C "$demo/clone-ssh" log --oneline -1
fi
printf 'ls -1 synced/docs\n' | run sftp -q -b - -S cocoonbox-ssh main

step "Put the box to sleep; the next command wakes it"
run cocoonbox localbox sleep main
run cocoonbox-ssh main 'echo awake again'

step "Offload a coding agent's task into the box: this repository, a hand-over, and the test stand-in CLI playing claude"
# The stand-in (cli/testdata/standin/standin-cli) is a test fixture that
# honours the real CLI's hooks and does the steps its prompt names; a real
# box runs the vendor's CLI, installed with `cocoonbox offload install-cli`.
box_home="$HOME/.local/state/cocoonbox/localbox/boxes/main/home"
mkdir -p "$box_home/.local/bin" "$box_home/.standin"
cp "$top/cli/testdata/standin/standin-cli" "$box_home/.local/bin/claude"
echo 'if [ -d "$HOME/.local/bin" ]; then PATH="$HOME/.local/bin:$PATH"; fi' >"$box_home/.profile"
printf '[user]\n\tname = Box User\n\temail = box-user@example.com\n' >"$box_home/.gitconfig"
echo demo@example.com >"$box_home/.standin/signed-in-claude"
# Written here as root, they must be the box user's, as the box's own files.
if [ "$(id -u)" = 0 ]; then
	chown -R "$(ls -ldn "$box_home" | awk '{print $3 ":" $4}')" "$box_home/.local" "$box_home/.standin" "$box_home/.profile" "$box_home/.gitconfig"
fi
run git clone -q "$top" "$demo/cocoonbox"
cd "$demo/cocoonbox"
echo "uncommitted on the laptop" >>README.md
handover=$(cocoonbox offload handover-path)
cat >"$handover" <<'EOF'
# Hand-over: note the offload demo in NOTES.md
## Goal and definition of done
NOTES.md says the demo ran in the box, committed.
## User preferences and constraints
none
## Current state
README.md has an uncommitted line; keep it.
## Decisions made
none
## Files touched
none
## Next steps
standin: append NOTES.md offloaded by make demo, written in the box
standin: progress
## Commands
none
## Environment facts
Secrets needed: none
## Gotchas learned
none
## Open questions
none
EOF
note "the hand-over your local coding agent would write, here written by the demo to $handover:"
sed 's/^/    /' "$handover"
run cocoonbox offload --kind claude
# The box agent posts a whole hand-over as its progress; its title and
# Current state say enough here.
brief() { sed -n '1,2p;/^## Current state/,/^$/p;/^session:/p'; echo "    (the rest of the hand-over left out)"; }
show cocoonbox offload inbox --wait 60
cocoonbox offload inbox --wait 60 | brief

step "Bring it back: the box's commits come home (its hand-over on stdout, shortened)"
show cocoonbox back
cocoonbox back | brief
run git log --oneline -3
run git status --short
note "git status printed nothing: README.md's uncommitted line travelled with the offload and came back inside the box agent's commit"
cd "$top"

step "Stop the local box"
run cocoonbox localbox stop
echo
echo "demo done"
