#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# unit.shellcheck: every shell script of the project (*.sh and files whose
# first line runs sh or bash) passes shellcheck at warning level, following
# the files it sources from its own folder. SKIP (exit 77) without shellcheck.
set -euo pipefail
ROOT=${1:?usage: check-shell.sh SOURCE_DIR}
command -v shellcheck >/dev/null || {
  echo "SKIP: shellcheck is not installed (scripts/deps.sh installs it)"
  exit 77
}
cd "$ROOT"
files=()
while IFS= read -r -d '' f; do
  case "$f" in
    *.sh) files+=("$f") ;;
    *) head -n1 "$f" 2>/dev/null | grep -Eq '^#!.*(/|env )(ba)?sh( |$)' && files+=("$f") ;;
  esac
done < <(find . -type d \( -name .git -o -name 'build*' -o -name bench-results -o -name node_modules \) -prune -o \
  -type f ! -name '*.*' -print0 -o -type f -name '*.sh' -print0)
[ "${#files[@]}" -gt 0 ] || { echo "no shell scripts under $ROOT" >&2; exit 1; }
echo "shellcheck: ${#files[@]} scripts"
shellcheck -x -P SCRIPTDIR -S warning "${files[@]}"
