#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# unit.yang: the incin-switch YANG module compiles (yanglint, strict) and the
# example instance data behaves: every examples/*-valid.xml is accepted as
# configuration, every examples/*-invalid-*.xml is rejected with the error
# its first comment line names.
set -u
here=$(cd "$(dirname "$0")" && pwd)
command -v yanglint >/dev/null || { echo "SKIP: yanglint missing (apt-get install libyang-tools)"; exit 77; }
module=$(ls "$here"/incin-switch@*.yang | tail -1)
fail=0
if out=$(yanglint -p "$here/ietf" "$module" 2>&1) && [ -z "$out" ]; then
  echo "ok: $(basename "$module") compiles"
else
  echo "FAIL: $(basename "$module") does not compile: $out"; fail=1
fi
for f in "$here"/examples/*-valid.xml; do
  if out=$(yanglint -p "$here/ietf" -t config "$module" "$f" 2>&1); then
    echo "ok: $(basename "$f") accepted"
  else
    echo "FAIL: $(basename "$f") rejected: $out"; fail=1
  fi
done
for f in "$here"/examples/*-invalid-*.xml; do
  want=$(sed -n 's/^<!-- expect: \(.*\) -->$/\1/p' "$f" | head -1)
  if out=$(yanglint -p "$here/ietf" -t config "$module" "$f" 2>&1); then
    echo "FAIL: $(basename "$f") accepted"; fail=1
  elif [ -n "$want" ] && ! grep -qF "$want" <<<"$out"; then
    echo "FAIL: $(basename "$f") rejected, but not for '$want': $out"; fail=1
  else
    echo "ok: $(basename "$f") rejected: $(head -1 <<<"$out")"
  fi
done
exit $fail
