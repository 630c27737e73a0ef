#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.packages: the Debian packages are what a Debian packager would accept
# and install into a clean root, and their programs run a job. Builds the
# packages with CPack from this build and runs lintian on every one (and on
# every -dbgsym package): any error or warning fails the test, printed. Then
# installs them with dpkg into a copy-on-write root of this machine
# (overlayfs over /, so the host stays untouched and dpkg checks the
# dependencies against what is really installed here), and checks: every
# package is "install ok installed", /etc/incin files are registered as
# conffiles, incin-manager's postinst made the system user incamd, the
# programs and plugins link libinc.so.0 instead of carrying a copy of
# libinc, the units pass `systemd-analyze verify` in that root and their
# `systemd-analyze security` exposure is within bounds, the installed incamd,
# incswitchd, incinctl and inc-perf run a namespace-lab allreduce with exact
# results, libinc-dev's example builds against the installed files (with
# pkg-config and with CMake's find_package) and runs the same job through the
# installed libinc.so.0, removal keeps the conffiles and purge deletes them,
# the AM state and the user. Not covered here: starting the units under a
# running systemd (this machine has none as PID 1): lab.systemd_units.
. "$(dirname "$0")/lib.sh" "$1" pk
require_bins incswitchd incamd incinctl inc-perf
for t in cpack dpkg dpkg-deb systemd-analyze; do
  command -v "$t" >/dev/null || { echo "SKIP: $t is not installed" >&2; TEST_OK=1; exit 77; }
done
# Not a skip: scripts/deps.sh installs lintian, and the packages' quality is
# what this test is for.
command -v lintian >/dev/null || fail "lintian is not installed (scripts/deps.sh installs it)"

WORK=$(mktemp -d /tmp/incin-pkgtest.XXXXXX)
ROOT="$WORK/root"
pk_cleanup() {
  cow_root_down "$WORK" "$ROOT"
  rm -rf "$WORK"
}
at_cleanup pk_cleanup

note "building the packages (cpack)"
cpack -G DEB --config "$INCLAB_BUILD/CPackConfig.cmake" -B "$WORK/pkgs" >"$WORK/cpack.log" 2>&1 ||
  { cat "$WORK/cpack.log"; fail "cpack failed"; }
PKGS=(incin-switch incin-manager incin-yang incin-cli incin-client incin-mpi incin-nccl libinc0 libinc-dev)
# python3-incin (built with userspace/torch): installed and removed with the
# others (it depends on libinc0); lab.torch_package tests it.
if ls "$WORK/pkgs/python3-incin_"*.deb >/dev/null 2>&1; then PKGS+=(python3-incin); fi
# Every package with programs or libraries has its debug info in -dbgsym.
DBGSYM=(incin-switch incin-manager incin-cli incin-client incin-mpi incin-nccl libinc0)
for p in "${PKGS[@]}"; do
  ls "$WORK/pkgs/${p}_"*.deb >/dev/null 2>&1 || fail "package $p was not built"
done
for p in "${DBGSYM[@]}"; do
  ls "$WORK/pkgs/${p}-dbgsym_"*.ddeb >/dev/null 2>&1 || fail "package $p-dbgsym was not built"
done
grep -q libbpf1 <<<"$(dpkg-deb -f "$WORK/pkgs/incin-switch_"*.deb Depends)" || fail "incin-switch does not depend on libbpf1"
for p in incin-client incin-mpi incin-nccl libinc-dev; do
  grep -qF "libinc0 (= $(dpkg-deb -f "$WORK/pkgs/libinc0_"*.deb Version))" <<<"$(dpkg-deb -f "$WORK/pkgs/${p}_"*.deb Depends)" ||
    fail "$p does not depend on this libinc0"
done
version=$(dpkg-deb -f "$WORK/pkgs/libinc0_"*.deb Version)
changelog=$(dpkg-parsechangelog -l "$LAB_TESTS_DIR/../packaging/debian/changelog" -S Version)
[ "$changelog" = "$version" ] || fail "packaging/debian/changelog's latest version is $changelog, the packages are $version"

note "lintian on every package (errors and warnings fail)"
# --fail-on: the exit status; the tags are printed either way. Overrides in
# the packages (/usr/share/lintian/overrides) apply; each gives its reason.
LINTIAN_OK=1
lintian --fail-on error,warning --tag-display-limit 0 "$WORK/pkgs/"*.deb "$WORK/pkgs/"*.ddeb \
  >"$WORK/lintian.log" 2>&1 || LINTIAN_OK=0
sed 's/^/  /' "$WORK/lintian.log"
[ "$LINTIAN_OK" = 1 ] || fail "lintian found errors or warnings (above)"

note "installing them with dpkg into a copy-on-write root of this machine"
cow_root "$WORK" "$ROOT"
dpkg --root="$ROOT" -i "$WORK/pkgs/"*.deb >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log"; fail "dpkg -i failed"; }
for p in "${PKGS[@]}"; do
  st=$(dpkg --root="$ROOT" -s "$p" | sed -n 's/^Status: //p')
  [ "$st" = "install ok installed" ] || fail "$p: status '$st'"
done
grep -q '^ /etc/incin/incamd.json ' <<<"$(dpkg --root="$ROOT" -s incin-manager)" || fail "incamd.json is not a conffile"
grep -q '^ /etc/incin/switch-example.json ' <<<"$(dpkg --root="$ROOT" -s incin-switch)" ||
  fail "switch-example.json is not a conffile"
grep -q '^incamd:' "$ROOT/etc/passwd" || fail "incin-manager's postinst did not create the user incamd"
# Libraries in Debian's multiarch directory; libinc.so.0 is found there by
# the installed programs (LD_LIBRARY_PATH: this root is not the host's).
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
LIBDIR="$ROOT/usr/lib/$MULTIARCH"
[ -f "$LIBDIR/libinc.so.0" ] || fail "libinc.so.0 is not installed in /usr/lib/$MULTIARCH"
[ -f "$ROOT/usr/include/inc/inc.h" ] || fail "inc/inc.h is not installed"
export LD_LIBRARY_PATH="$LIBDIR"
MPILIB="$LIBDIR/incin/libincmpi.so"
# Open MPI's own component directory of this root (ompi_info's pkglibdir).
OMPI_PKGLIB=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
COMPONENT="$ROOT$OMPI_PKGLIB/mca_coll_incin.so"
[ -f "$MPILIB" ] || fail "incin-mpi does not install /usr/lib/$MULTIARCH/incin/libincmpi.so"
[ -f "$COMPONENT" ] || fail "incin-mpi does not install the Open MPI component mca_coll_incin.so in $OMPI_PKGLIB"
# One libinc: inc-perf and the plugins link libinc.so.0 and carry no copy of
# it (its protobuf descriptor, with the file name inc/v1/inc.proto, is in
# libinc.so.0 only).
for f in "$ROOT/usr/bin/inc-perf" "$MPILIB" "$COMPONENT" "$LIBDIR/libnccl-net-incin.so"; do
  deps=$(ldd "$f")
  ! grep -q "not found" <<<"$deps" || fail "$f has unresolved libraries: $deps"
  grep -q "$LIBDIR/libinc.so.0" <<<"$deps" || fail "$f does not use the installed libinc.so.0"
  ! grep -qa "inc/v1/inc.proto" "$f" || fail "$f carries its own copy of libinc"
done
grep -qa "inc/v1/inc.proto" "$LIBDIR/libinc.so.0" || fail "libinc.so.0 lacks libinc's protobuf descriptor"
# Stripped, with the debug info in the -dbgsym packages.
for f in "$ROOT/usr/sbin/incswitchd" "$ROOT/usr/sbin/incamd" "$ROOT/usr/bin/incinctl" "$LIBDIR/libinc.so.0"; do
  ! grep -q "not stripped" <<<"$(file -L "$f")" || fail "$f is not stripped"
done
for prog in incswitchd.8 incamd.8 incinctl.1 inc-perf.1 inc-certs.1; do
  [ -f "$ROOT/usr/share/man/man${prog##*.}/$prog.gz" ] || fail "no man page $prog"
done
[ "$(find "$ROOT/usr/share" -name 'incin-switch@*.yang' | wc -l)" = 1 ] || fail "the YANG module is not installed exactly once"
[ -f "$ROOT/usr/share/incin/prometheus/incin-rules.yml" ] || fail "incin-manager does not install the Prometheus rules"

# --- incin-mpi: coll/incin is one of Open MPI's own components ---------------
# In the installed root (chroot: that root's Open MPI, its default component
# path and library path, no mca_component_path), ompi_info lists coll/incin,
# off by default, with its parameters; as coll/ucc, a job turns it on.
note "incin-mpi: ompi_info in the installed root finds coll/incin with no component path"
INFO=$(env -u OMPI_MCA_mca_component_path -u OMPI_MCA_coll_incin_enable -u LD_LIBRARY_PATH \
  chroot "$ROOT" ompi_info --param coll incin --level 9 2>&1) || fail "ompi_info in the installed root failed: $INFO"
grep -q 'MCA coll: incin (MCA v2.1.0, API v2.0.0' <<<"$INFO" ||
  fail "ompi_info does not list the installed coll/incin without a component path: $INFO"
grep -q 'coll_incin_enable" (current value: "false", data source: default' <<<"$INFO" ||
  fail "the installed coll/incin is not off by default"
for p in priority am tls_ca min_bytes op_timeout_ms require_offload log_level; do
  grep -q "\"coll_incin_$p\"" <<<"$INFO" || fail "ompi_info does not show coll_incin_$p of the installed coll/incin"
done
grep 'MCA coll: incin' <<<"$INFO" | sed 's/^ */  /'
# --- end of incin-mpi's block ------------------------------------------------
grep -q '^incamd [0-9]' <<<"$("$ROOT/usr/sbin/incamd" --version)" || fail "installed incamd --version"
grep -q '^incswitchd [0-9]' <<<"$("$ROOT/usr/sbin/incswitchd" --version)" || fail "installed incswitchd --version"
grep -q '^incinctl [0-9]' <<<"$("$ROOT/usr/bin/incinctl" --version)" || fail "installed incinctl --version"

note "libinc-dev: the example builds against the installed files"
EXAMPLES="$ROOT/usr/share/doc/libinc-dev/examples"
PC=$(PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --cflags --libs inc) || fail "pkg-config does not know inc"
# shellcheck disable=SC2086  # pkg-config's flags are words
cc -Wall -Werror "$EXAMPLES/allreduce.c" $PC -Wl,-rpath,"$LIBDIR" -o "$WORK/inc-c-example" ||
  fail "the example does not build with pkg-config"
cmake -S "$EXAMPLES" -B "$WORK/example-cmake" -DCMAKE_PREFIX_PATH="$ROOT/usr" >"$WORK/cmake.log" 2>&1 &&
  cmake --build "$WORK/example-cmake" >>"$WORK/cmake.log" 2>&1 ||
  { cat "$WORK/cmake.log"; fail "the example does not build with find_package(inc)"; }
grep -q "$LIBDIR/libinc.so.0" <<<"$(ldd "$WORK/inc-c-example")" || fail "the example does not use the installed libinc.so.0"
[ -f "$LIBDIR/libnccl-net-incin.so" ] || fail "incin-nccl does not install libnccl-net-incin.so next to libinc.so.0"
grep -q "$LIBDIR/libinc.so.0" <<<"$(LD_LIBRARY_PATH="$LIBDIR" ldd "$LIBDIR/libnccl-net-incin.so")" ||
  fail "the installed NCCL plugin does not resolve the installed libinc.so.0"
for sym in ncclCollNetPlugin_v10 ncclNetPlugin_v8; do
  grep -qw "$sym" <<<"$(nm -D --defined-only "$LIBDIR/libnccl-net-incin.so")" || fail "installed NCCL plugin lacks $sym"
done

note "systemd-analyze verify of the installed units"
cp "$ROOT/usr/lib/systemd/system/incswitchd@.service" "$ROOT/etc/systemd/system/incswitchd@leaf0.service"
for u in /usr/lib/systemd/system/incamd.service /etc/systemd/system/incswitchd@leaf0.service; do
  # --man=no: the man pages are in $ROOT, where man(1) does not look (checked above).
  out=$(systemd-analyze verify --man=no --root="$ROOT" "$ROOT$u" 2>&1 || true)
  # Without a running systemd, verify cannot talk to a manager; anything it
  # says about the unit itself is a failure.
  bad=$(printf '%s\n' "$out" | grep -E "$(basename "$u")" | grep -vE 'Failed to create .*/start: |Unit .*\.target not found' || true)
  [ -z "$bad" ] || fail "systemd-analyze verify $u: $bad"
done
# The sandboxing's score (lab.systemd_units checks it again under systemd,
# with the daemons' credentials): 0 is locked down, 10 is no sandbox.
for bound in incamd.service=4.0 incswitchd@leaf0.service=6.0; do
  u=${bound%=*}
  [ "$u" = incamd.service ] && f="$ROOT/usr/lib/systemd/system/$u" || f="$ROOT/etc/systemd/system/$u"
  out=$(systemd-analyze security --offline=yes --root="$ROOT" "$f" 2>&1 || true)
  score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
  [ -n "$score" ] || fail "systemd-analyze security $u: no score: $out"
  note "$u: exposure $score (at most ${bound#*=})"
  awk -v s="$score" -v b="${bound#*=}" 'BEGIN { exit !(s <= b) }' || fail "$u: exposure $score above ${bound#*=}"
done
grep -q '^Type=notify' "$ROOT/usr/lib/systemd/system/incamd.service" || fail "incamd.service is not Type=notify"
grep -q '^RestartKillSignal=SIGUSR2' "$ROOT/usr/lib/systemd/system/incswitchd@.service" ||
  fail "incswitchd@.service does not restart with SIGUSR2"

note "a lab job with the installed daemons, CLI and inc-perf"
export INCLAB_BIN="$ROOT/usr/sbin $ROOT/usr/bin"
mkdir -p "$WORK/bin"  # inc-perf alone: all of $ROOT/usr/bin would shadow the host's tools
ln -s "$ROOT/usr/bin/inc-perf" "$WORK/bin/inc-perf"
export PATH="$WORK/bin:$PATH"
lab_up k single
L="${P}k"
pgrep -af "$ROOT/usr/sbin/incamd" >/dev/null || fail "the lab's incamd is not the installed one"
pgrep -af "$ROOT/usr/sbin/incswitchd" >/dev/null || fail "the lab's incswitchd is not the installed one"
perf k installed -- allreduce -d float32 -o sum -b 4 -e 1M -f 16 -n 3 -w 1 || fail "allreduce with the installed programs"
[ "$(readlink -f "$(command -v inc-perf)")" = "$ROOT/usr/bin/inc-perf" ] || fail "inc-perf is not the installed one"
"$INCLAB" run "$L" --quiet --tag c-example -- "$WORK/inc-c-example" --am '{am}' --job '{prefix}-c-example' \
  --rank '{rank}' --world '{world}' --iface '{iface}' || fail "the C example's job failed"
grep -h "wrong" "/tmp/inclab-$L/logs/c-example-"w*.log | sed 's/^/  /'
[ "$(grep -l ": 0 wrong$" "/tmp/inclab-$L/logs/c-example-"w*.log | wc -l)" = 4 ] ||
  fail "the C example's ranks did not all report 0 wrong"
lab_down k

note "remove keeps the conffiles, purge deletes them"
dpkg --root="$ROOT" -r "${PKGS[@]}" >>"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log"; fail "dpkg -r failed"; }
[ ! -e "$ROOT/usr/sbin/incamd" ] || fail "incamd left after remove"
[ -e "$ROOT/etc/incin/incamd.json" ] || fail "remove deleted the conffile incamd.json"
grep -q '^incamd:' "$ROOT/etc/passwd" || fail "remove deleted the user incamd"
# What incamd leaves under systemd: its state directory (StateDirectory=).
mkdir -p "$ROOT/var/lib/incin"
echo state >"$ROOT/var/lib/incin/incamd.db"
dpkg --root="$ROOT" -P "${PKGS[@]}" >>"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log"; fail "dpkg -P failed"; }
[ ! -e "$ROOT/etc/incin/incamd.json" ] || fail "purge left incamd.json"
[ ! -e "$ROOT/var/lib/incin" ] || fail "purge left the AM state /var/lib/incin"
! grep -q '^incamd:' "$ROOT/etc/passwd" || fail "purge left the user incamd"
! grep -q '^incamd:' "$ROOT/etc/group" || fail "purge left the group incamd"
pass
