#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# unit.client_c_api_exports: libinc.so.0 exports exactly the functions its
# C header declares: nothing of the C++ inside (which would clash with other
# versions of gRPC, protobuf or libinc's own classes in the same process),
# and no declared function missing.
set -euo pipefail
lib=${1:?libinc.so} header=${2:?inc.h}
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -oE '\binc_[a-z_]+\(' "$header" | tr -d '(' | sort -u)
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
[ -z "$extra" ] || { echo "FAIL: libinc exports symbols outside its C API:"; echo "$extra" | head -20; exit 1; }
[ -z "$missing" ] || { echo "FAIL: declared but not exported:"; echo "$missing"; exit 1; }
other=$(nm -D --defined-only "$lib" | awk '$2 != "T" && $2 != "A" {print $3}' | head -5)
[ -z "$other" ] || { echo "FAIL: libinc exports data symbols: $other"; exit 1; }
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libinc.so.0 ] || { echo "FAIL: SONAME is '$soname', not libinc.so.0"; exit 1; }
echo "libinc exports the $(echo "$exported" | wc -l) functions of inc.h and nothing else; SONAME $soname"
