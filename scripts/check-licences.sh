#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every source file carries an SPDX line in its first three lines:
# (GPL-2.0-only OR BSD-2-Clause) for the BPF programs and headers under bpf/
# (they are loaded into the kernel), Apache-2.0 for everything else. The
# licence texts are LICENSE and LICENSES/. Data (keys, certificates, fuzz
# seeds, measurements), documents and the IETF's YANG modules are not source.
# Usage: check-licences.sh [source root]; exits 1 naming every file that fails.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
for f in LICENSE LICENSES/Apache-2.0.txt LICENSES/GPL-2.0-only.txt LICENSES/BSD-2-Clause.txt; do
  [ -s "$f" ] || { echo "FAIL: licence text $f missing" >&2; exit 1; }
done
bad=0 checked=0
while IFS= read -r -d '' f; do
  case "$f" in
    ./build*|./.git/*|./fuzz/corpus/*|./yang/ietf/*|./docs/*|./LICENSE*|*/testdata/*) continue ;;
  esac
  name=${f##*/}
  case "$name" in
    *.cc|*.h|*.c|*.proto|*.py|*.sh|*.cmake|CMakeLists.txt|*.map|*.service|*.in|*.yang|*.yml|*.yaml) ;;
    *) [ -x "$f" ] && head -c2 "$f" | grep -q '#!' || continue ;;
  esac
  checked=$((checked + 1))
  head=$(head -n 3 "$f")
  case "$f" in
    ./bpf/*.c|./bpf/*.h) want='SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)' ;;
    *) want='SPDX-License-Identifier: Apache-2.0' ;;
  esac
  if [[ "$head" != *"$want"* ]]; then
    echo "FAIL: $f lacks '$want' in its first 3 lines" >&2
    bad=$((bad + 1))
  fi
done < <(find . -type f -print0)
[ "$checked" -gt 300 ] || { echo "FAIL: only $checked source files found under $root" >&2; exit 1; }
[ "$bad" -eq 0 ] || { echo "FAIL: $bad of $checked source files without their SPDX line" >&2; exit 1; }
echo "licences: $checked source files, each with its SPDX line"
