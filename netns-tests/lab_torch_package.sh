#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.torch_package: the torch backend as Debian installs it (python3-incin,
# docs/pytorch.md "Installing"). Builds libinc0 and python3-incin with CPack
# from this build (lab.packages runs lintian on it with every package),
# installs both with dpkg into a copy-on-write root of this machine
# (overlayfs over /, dependencies checked against what is installed here:
# python3-torch), and checks: the package depends on libinc0 and
# python3-torch (>= 1.13); the installed extension is in
# /usr/lib/python3/dist-packages/incin/, carries no RPATH/RUNPATH (none into
# this build tree) and resolves libinc.so.0 from the installed libinc0;
# `import incin` in that root (chroot, no PYTHONPATH) registers the backend
# from /usr/lib/python3/dist-packages. Then, in a single-level namespace lab,
# a 4-rank DDP job (torch_ddp_train.py) with the installed package (this root
# is not the host's, so its dist-packages and library directory are named
# by PYTHONPATH and LD_LIBRARY_PATH, as lab.packages does for the programs)
# must form its group and offload every DDP allreduce; and, with the AM
# unreachable (INCIN_AM at a closed port), a job with INCIN_REQUIRE_OFFLOAD=1
# must fail on every rank naming the setting and reason=no_group, while the
# same job without it falls back to gloo and completes with right results.
# SKIP (77) without python3-torch, cpack, dpkg or overlayfs.
. "$(dirname "$0")/lib.sh" "$1" tk
require_bins incswitchd incamd
need_torch
for t in cpack dpkg dpkg-deb chroot readelf; do
  command -v "$t" >/dev/null || skip "$t is not installed"
done
# need_torch put the build tree's package on PYTHONPATH: this test must not see it.
unset PYTHONPATH
TRAIN="$LAB_TESTS_DIR/torch_ddp_train.py"
STEPS=30

WORK=$(mktemp -d /tmp/incin-torchpkg.XXXXXX)
ROOT="$WORK/root"
tk_cleanup() {
  cow_root_down "$WORK" "$ROOT" "$ROOT/dev" "$ROOT/proc"
  rm -rf "$WORK"
}
at_cleanup tk_cleanup

note "building libinc0 and python3-incin (cpack)"
cpack -G DEB --config "$INCLAB_BUILD/CPackConfig.cmake" -B "$WORK/pkgs" -D CPACK_COMPONENTS_ALL="lib;python" \
  >"$WORK/cpack.log" 2>&1 || { cat "$WORK/cpack.log"; fail "cpack failed"; }
DEB=$(ls "$WORK/pkgs/python3-incin_"*.deb 2>/dev/null | head -n1)
[ -n "$DEB" ] || fail "python3-incin was not built (is userspace/torch built?)"
version=$(dpkg-deb -f "$WORK/pkgs/libinc0_"*.deb Version)
deps=$(dpkg-deb -f "$DEB" Depends)
note "python3-incin Depends: $deps"
grep -qF "libinc0 (= $version)" <<<"$deps" || fail "python3-incin does not depend on this libinc0"
grep -qF "python3-torch (>= 1.13)" <<<"$deps" || fail "python3-incin does not depend on python3-torch (>= 1.13)"
[ "$(dpkg-deb -f "$DEB" Section)" = python ] || fail "python3-incin is not in section python"

note "installing them with dpkg into a copy-on-write root of this machine"
cow_root "$WORK" "$ROOT"
dpkg --root="$ROOT" -i "$WORK/pkgs/libinc0_"*.deb "$DEB" >"$WORK/dpkg.log" 2>&1 ||
  { cat "$WORK/dpkg.log"; fail "dpkg -i failed"; }
st=$(dpkg --root="$ROOT" -s python3-incin | sed -n 's/^Status: //p')
[ "$st" = "install ok installed" ] || fail "python3-incin: status '$st'"
PYDIR="$ROOT/usr/lib/python3/dist-packages"
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
LIBDIR="$ROOT/usr/lib/$MULTIARCH"
EXT=$(ls "$PYDIR/incin/_incin_torch".*.so 2>/dev/null | head -n1)
[ -n "$EXT" ] || fail "no extension _incin_torch.*.so in /usr/lib/python3/dist-packages/incin"
[ -f "$PYDIR/incin/__init__.py" ] || fail "no incin/__init__.py in /usr/lib/python3/dist-packages"
[ -f "$ROOT/usr/share/doc/python3-incin/pytorch.md" ] || fail "python3-incin has no docs/pytorch.md"
rpath=$(readelf -d "$EXT" | grep -E 'R(UN)?PATH' || true)
[ -z "$rpath" ] || fail "the installed extension has an RPATH/RUNPATH: $rpath"
ldd_out=$(LD_LIBRARY_PATH="$LIBDIR" ldd "$EXT")
! grep -q "not found" <<<"$ldd_out" || fail "the installed extension has unresolved libraries: $ldd_out"
grep -q "$LIBDIR/libinc.so.0" <<<"$ldd_out" || fail "the installed extension does not use the installed libinc.so.0"
! grep -q "$INCLAB_BUILD" <<<"$ldd_out" || fail "the installed extension resolves libraries in the build tree"

# In the root itself: no PYTHONPATH, no LD_LIBRARY_PATH; Python's own path.
mount --bind /proc "$ROOT/proc"
mount --bind /dev "$ROOT/dev"
out=$(env -u PYTHONPATH -u LD_LIBRARY_PATH chroot "$ROOT" /usr/bin/python3 -c '
import incin, torch.distributed as d
assert "INCIN" in d.Backend._plugins, "backend not registered"  # torch 1.13: Backend.INCIN == "INCIN"
print(incin.__file__, incin._incin_torch.__file__, incin.libinc_version())' 2>&1) ||
  fail "import incin in the installed root: $out"
note "installed root: $out"
grep -q "^/usr/lib/python3/dist-packages/incin/__init__.py /usr/lib/python3/dist-packages/incin/_incin_torch" \
  <<<"$out" || fail "incin was not imported from /usr/lib/python3/dist-packages: $out"
umount "$ROOT/dev" "$ROOT/proc"

# The lab's ranks use the installed package from the host side.
export PYTHONPATH="$PYDIR" LD_LIBRARY_PATH="$LIBDIR"
where=$("$PY" -c 'import incin; print(incin._incin_torch.__file__)')
[ "$where" = "$EXT" ] || fail "the ranks would import incin from $where, not $EXT"

lab_up l single
L="$P"l
DIR="$WORK/out"
mkdir -p "$DIR"

note "DDP with the installed backend: $STEPS steps on 4 ranks"
"$INCLAB" run "$L" --quiet --tag torch-pkg -- timeout -k 5 240 "$PY" "$TRAIN" --backend incin --rank '{rank}' \
  --world '{world}' --master "10.0.0.2:29811" --steps "$STEPS" --am '{am}' --job "{prefix}-torch-pkg" \
  --out "$DIR/pkg-{rank}.json" || fail "a rank of the DDP job failed (logs /tmp/inclab-$L/logs/torch-pkg-w*.log)"
python3 - "$DIR" "$STEPS" "$EXT" <<'PY' || fail "the DDP job with the installed backend did not offload"
import json, sys
d, steps = sys.argv[1], int(sys.argv[2])
bad = []
docs = [json.load(open(f"{d}/pkg-{r}.json")) for r in range(4)]
if len({x["param_sha256"] for x in docs}) != 1:
    bad.append("ranks hold different parameters")
for x in docs:
    s, r = x["summary"], x["rank"]
    if x["wrong"]:
        bad.append(f"rank {r}: {len(x['wrong'])} wrong checks")
    if s["group"] != "ok":
        bad.append(f"rank {r}: group {s['group']} ({s['group_detail']})")
        continue
    n = s["collectives"]["allreduce"]["offloaded"]["calls"]
    if n < steps:
        bad.append(f"rank {r}: {n} allreduces offloaded < {steps} steps")
    if s["failed_offloads"]:
        bad.append(f"rank {r}: {s['failed_offloads']} failed offloads")
print("  rank 0 offloaded:", {k: v["offloaded"]["calls"] for k, v in docs[0]["summary"]["collectives"].items()})
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# A closed port on worker 0 (every rank reaches it): no AM answers, the group
# cannot form (reason no_group).
CLOSED_AM="10.0.0.2:9"
note "AM unreachable ($CLOSED_AM), INCIN_REQUIRE_OFFLOAD=1: every rank must fail with the reason"
rc=0
INCIN_REQUIRE_OFFLOAD=1 INCIN_JOIN_TIMEOUT_MS=5000 "$INCLAB" run "$L" --quiet --tag torch-req -- timeout -k 5 120 \
  "$PY" "$TRAIN" --backend incin --rank '{rank}' --world '{world}' --master "10.0.0.2:29812" --steps 5 \
  --am "$CLOSED_AM" --job "{prefix}-torch-req" --no-checks --out "$DIR/req-{rank}.json" || rc=$?
[ "$rc" != 0 ] || fail "the job with INCIN_REQUIRE_OFFLOAD=1 and no AM completed"
for w in w0 w1 w2 w3; do
  log="/tmp/inclab-$L/logs/torch-req-$w.log"
  grep -q "INCIN_REQUIRE_OFFLOAD is set: .* would fall back to gloo (reason=no_group" "$log" ||
    fail "$w: no INCIN_REQUIRE_OFFLOAD error naming reason=no_group ($log: $(tail -n 3 "$log"))"
done
grep -h "INCIN_REQUIRE_OFFLOAD is set" "/tmp/inclab-$L/logs/torch-req-w0.log" | head -n1 | sed 's/^/  w0| /'

note "AM unreachable, without the setting: falls back to gloo and completes"
# With the collective checks (bfloat16 all_reduce, the _tensor forms and
# the rest, each against its expected value): on gloo they run through the
# backend's compositions of what gloo 1.13 lacks (docs/pytorch.md).
INCIN_JOIN_TIMEOUT_MS=5000 "$INCLAB" run "$L" --quiet --tag torch-fb -- timeout -k 5 180 "$PY" "$TRAIN" \
  --backend incin --rank '{rank}' --world '{world}' --master "10.0.0.2:29813" --steps 10 --am "$CLOSED_AM" \
  --job "{prefix}-torch-fb" --out "$DIR/fb-{rank}.json" ||
  fail "the job without INCIN_REQUIRE_OFFLOAD did not complete on gloo (logs /tmp/inclab-$L/logs/torch-fb-w*.log)"
python3 - "$DIR" <<'PY' || fail "the fallback job's results"
import json, sys
bad = []
for r in range(4):
    x = json.load(open(f"{sys.argv[1]}/fb-{r}.json"))
    s = x["summary"]
    if x["wrong"]:
        bad.append(f"rank {r}: {len(x['wrong'])} wrong checks")
    if s["group"] == "ok":
        bad.append(f"rank {r}: a group formed with the AM unreachable")
    if s["collectives"]["allreduce"]["offloaded"]["calls"]:
        bad.append(f"rank {r}: allreduces offloaded with the AM unreachable")
    if not s["fallback_reasons"].get("no_group"):
        bad.append(f"rank {r}: no fallback counted as no_group: {s['fallback_reasons']}")
print("  rank 0 fallback reasons:", json.load(open(f"{sys.argv[1]}/fb-0.json"))["summary"]["fallback_reasons"])
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
lab_down l
pass
