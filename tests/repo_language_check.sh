#!/usr/bin/env bash
# The repository speaks of the product: its history by date and commit, never by the working
# sessions or runs that produced it ("session 17", "device call 4", "had no device"), and never of
# folders that exist only on the machines it was developed on (`.dev/` carry folders, `../shared`).
# Every tracked text file is searched; each hit is printed as file:line: text, and the check fails.
# Usage: tests/repo_language_check.sh SOURCE_DIR
set -eu -o pipefail
src=${1:?SOURCE_DIR}
cd "$src"

# Extended regular expressions, matched case-insensitively.
patterns=(
  '\bsessions?[- ][0-9]+'           # session 17, session-15, sessions 3-5
  '\bdevice calls?\b'               # device call 4
  '(^|[^-_[:alnum:]])calls? [0-9]+\b' # call 3, calls 1-2 (a run's number in place of its date; not --calls 200)
  'had no device'
  '(^|[^[:alnum:]_.])\.dev/'        # a carried build folder (.dev/bin/...)
  '\.\./shared'
  '\bcall[0-9]+\.sh\b'              # a run's throwaway script
  'KINDS\.md'
  'device tool'
)
# This file names the patterns; .gitignore keeps the carried folder out of the index.
exclude=(':!tests/repo_language_check.sh' ':!.gitignore')

args=()
for p in "${patterns[@]}"; do args+=(-e "$p"); done
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  hits=$(git grep -nIiE "${args[@]}" -- . "${exclude[@]}" || true)
else  # an exported tree: every file but build folders and VCS metadata
  hits=$(grep -rnIiE "${args[@]}" --exclude-dir=.git --exclude-dir='build*' \
           --exclude=repo_language_check.sh --exclude=.gitignore . | sed 's|^\./||' || true)
fi
if [ -n "$hits" ]; then
  echo "$hits"
  echo "FAIL: $(wc -l <<<"$hits") line(s) above speak of how the work was organised (sessions, runs, carried"
  echo "      folders); say it by date and commit, or of the product."
  exit 1
fi
echo "PASS: no tracked file speaks of sessions, runs or carried folders"
