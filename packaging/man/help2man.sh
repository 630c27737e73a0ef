#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writes the gzipped man page of a program from its --help and --version:
#   help2man.sh PROGRAM SECTION "NAME LINE" OUT.gz [help2man options...]
# The program runs through a symlink on PATH so that its usage line names it
# as a user types it, not by its path in the build tree.
set -euo pipefail
prog=${1:?program} section=${2:?section} name=${3:?name line} out=${4:?output}
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$(readlink -f "$prog")" "$tmp/$(basename "$prog")"
PATH="$tmp:$PATH" help2man --no-info --no-discard-stderr --section="$section" --name="$name" \
  --output="$tmp/page" "$@" "$(basename "$prog")"
gzip -9n -c "$tmp/page" >"$out.tmp"
mv "$out.tmp" "$out"
