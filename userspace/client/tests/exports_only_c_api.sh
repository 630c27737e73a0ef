#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# unit.client_c_api_exports: libinc.so.0's public node INC_0 holds exactly
# the functions its C header declares (no declared function missing, no
# data), and everything else it exports is libinc's own C++ (namespace inc)
# in the version-bound private node INCIN_PRIVATE_<version>
# (libinc_private.map.in): nothing of gRPC, protobuf or the C++ library,
# which would clash with other versions of them in the same process.
set -euo pipefail
lib=${1:?libinc.so} header=${2:?inc.h}
syms=$(nm -D --defined-only "$lib")
exported=$(awk '$2 == "T" && $3 ~ /@@?INC_0$/ {print $3}' <<<"$syms" | sed 's/@.*//' | sort -u)
declared=$(grep -oE '\binc_[a-z_]+\(' "$header" | tr -d '(' | sort -u)
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
[ -z "$extra" ] || { echo "FAIL: libinc's C API node exports symbols outside inc.h:"; echo "$extra" | head -20; exit 1; }
[ -z "$missing" ] || { echo "FAIL: declared but not exported:"; echo "$missing"; exit 1; }
other=$(awk '$2 != "T" && $2 != "A" && $3 ~ /@@?INC_0$/ {print $3}' <<<"$syms" | head -5)
[ -z "$other" ] || { echo "FAIL: libinc's C API node exports data symbols: $other"; exit 1; }
private=$(awk '$2 != "A" && $3 !~ /@@?INC_0$/ {print $3}' <<<"$syms")
unversioned=$(grep -v '@' <<<"$private" | head -5 || true)
[ -z "$unversioned" ] || { echo "FAIL: libinc exports symbols without a version node: $unversioned"; exit 1; }
nodes=$(sed 's/.*@@\{0,1\}//' <<<"$private" | sort -u)
[ -z "$nodes" ] || [[ "$nodes" =~ ^INCIN_PRIVATE_[0-9.]+$ ]] ||
  { echo "FAIL: libinc exports symbols in version nodes other than INC_0 and INCIN_PRIVATE_<version>: $nodes"; exit 1; }
foreign=$(sed 's/@.*//' <<<"$private" | c++filt | grep -vE '^((typeinfo|typeinfo name|vtable|VTT|guard variable|(non-)?virtual thunk) for |(non-)?virtual thunk to )?inc::' | head -5 || true)
[ -z "$foreign" ] || { echo "FAIL: libinc's private node exports names outside namespace inc:"; echo "$foreign"; exit 1; }
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libinc.so.0 ] || { echo "FAIL: SONAME is '$soname', not libinc.so.0"; exit 1; }
echo "libinc exports the $(echo "$exported" | wc -l) functions of inc.h in INC_0, $(grep -c . <<<"$private" || true)" \
  "C++ symbols of namespace inc in ${nodes:-no private node}; SONAME $soname"
