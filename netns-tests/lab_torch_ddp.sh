#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lab.torch_ddp_<kind>: the torch.distributed backend "incin" (docs/pytorch.md)
# on the lab's four workers, one rank per worker namespace
# (netns-tests/torch_ddp_train.py). Each run first checks the collectives
# element by element (all_reduce SUM/MIN/MAX on float32, float16, bfloat16,
# float64, int32, int64; broadcast; all_gather; barrier; under incin also
# reduce_scatter, the *_tensor forms and non-contiguous all_reduce/broadcast;
# and calls that must fall back: PRODUCT, uint8, reduce), then trains an MLP with
# DistributedDataParallel on CPU for 300 steps on seeded synthetic data.
# Three runs: gloo, incin, incin again. Passes when every rank of every run
# reports 0 wrong checks; within each run all ranks hold the same parameter
# bytes (sha256); the incin loss curves match gloo's within 1e-3 (relative,
# per step and rank); both incin runs end with bit-identical parameters; every
# rank's summary shows its group formed, every DDP allreduce offloaded (none
# fell back as anything but the checks' reasons), offloaded broadcast,
# allgather, barrier and reduce_scatter, and the fallbacks counted per
# reason, each reason logged exactly once per rank.
#   lab_torch_ddp.sh BUILD single|two
. "$(dirname "$0")/lib.sh" "$1" td
KIND=${2:-single}
case "$KIND" in single | two) ;; *) fail "kind must be single or two, not '$KIND'" ;; esac
require_bins incswitchd incamd
need_torch
TRAIN="$LAB_TESTS_DIR/torch_ddp_train.py"
STEPS=${TORCH_DDP_STEPS:-300}

DIR=$(mktemp -d /tmp/incin-torch.XXXXXX)
at_cleanup 'rm -rf "$DIR"'

lab_up l "$KIND"
L="$P"l
# run TAG BACKEND PORT: one job of torch_ddp_train.py on the four workers.
run() {
  local tag=$1 backend=$2 port=$3 rc=0 t0
  t0=$(date +%s.%N)
  "$INCLAB" run "$L" --quiet --tag "torch-$tag" -- "$PY" "$TRAIN" --backend "$backend" --rank '{rank}' \
    --world '{world}' --master "10.0.0.2:$port" --steps "$STEPS" --am '{am}' --job "{prefix}-torch-$tag" \
    --out "$DIR/$tag-{rank}.json" || rc=$?
  grep -h "checks:" "/tmp/inclab-$L/logs/torch-$tag-"w*.log | sed 's/^/  /' || true
  [ "$rc" = 0 ] || fail "$tag: a rank failed (exit $rc; logs /tmp/inclab-$L/logs/torch-$tag-w*.log)"
  note "$tag: $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)") s"
}

note "$KIND-level lab: gloo, then incin twice, $STEPS DDP steps each"
run gloo gloo 29611
run incin1 incin 29612
run incin2 incin 29613

# Every fallback reason is logged once per rank (the first time), not per call.
for w in w0 w1 w2 w3; do
  log="/tmp/inclab-$L/logs/torch-incin1-$w.log"
  for reason in unsupported_op unsupported_dtype unsupported_collective; do
    n=$(grep -c "incin-torch: fallback reason=$reason " "$log" || true)
    [ "$n" = 1 ] || fail "$w: $n log lines for reason=$reason, want 1 ($log)"
  done
done
grep -h "incin-torch: fallback reason=" "/tmp/inclab-$L/logs/torch-incin1-w0.log" | sed 's/^/  w0| /'
grep -h "incin-torch: " "/tmp/inclab-$L/logs/torch-incin1-w0.log" | grep -E "summary|  (collective|allreduce|broadcast)" |
  sed 's/^/  w0| /'

python3 - "$DIR" "$STEPS" <<'PY' || fail "result checks failed"
import json, sys
d, steps = sys.argv[1], int(sys.argv[2])
runs = {t: [json.load(open(f"{d}/{t}-{r}.json")) for r in range(4)] for t in ("gloo", "incin1", "incin2")}
bad = []
for t, docs in runs.items():
    hashes = {x["param_sha256"] for x in docs}
    if len(hashes) != 1:
        bad.append(f"{t}: ranks hold different parameters: {sorted(hashes)}")
    for x in docs:
        if x["wrong"]:
            bad.append(f"{t} rank {x['rank']}: {len(x['wrong'])} wrong checks")
        if len(x["losses"]) != steps:
            bad.append(f"{t} rank {x['rank']}: {len(x['losses'])} losses")
worst = 0.0
for r in range(4):
    g, i = runs["gloo"][r]["losses"], runs["incin1"][r]["losses"]
    for s, (a, b) in enumerate(zip(g, i)):
        dev = abs(a - b) / max(1.0, abs(a))
        worst = max(worst, dev)
        if dev > 1e-3:
            bad.append(f"rank {r} step {s}: loss gloo {a} incin {b}")
            break
if runs["incin1"][0]["param_sha256"] != runs["incin2"][0]["param_sha256"]:
    bad.append("the two incin runs ended with different parameters")
for t in ("incin1", "incin2"):
    for x in runs[t]:
        s, r = x["summary"], x["rank"]
        c = s["collectives"]
        if s["group"] != "ok":
            bad.append(f"{t} rank {r}: group {s['group']} ({s['group_detail']})")
            continue
        for name in ("allreduce", "broadcast", "allgather", "barrier", "reduce_scatter", "_allgather_base",
                     "_reduce_scatter_base"):
            if c.get(name, {}).get("offloaded", {}).get("calls", 0) == 0:
                bad.append(f"{t} rank {r}: {name} never offloaded")
        # DDP: one bucket, one allreduce per step, all offloaded.
        if c["allreduce"]["offloaded"]["calls"] < steps:
            bad.append(f"{t} rank {r}: {c['allreduce']['offloaded']['calls']} allreduces offloaded < {steps} steps")
        want = {"unsupported_op": 1, "unsupported_dtype": 1, "unsupported_collective": 1}
        if s["fallback_reasons"] != want:
            bad.append(f"{t} rank {r}: fallback reasons {s['fallback_reasons']}, want {want}")
        if s["failed_offloads"]:
            bad.append(f"{t} rank {r}: {s['failed_offloads']} failed offloads")
s = runs["incin1"][0]["summary"]
print(f"  losses {runs['gloo'][0]['losses'][0]:.4f} -> {runs['gloo'][0]['losses'][-1]:.4f} (gloo, rank 0); "
      f"worst incin/gloo deviation {worst:.2e}; params {runs['incin1'][0]['params']}, "
      f"sha256 {runs['incin1'][0]['param_sha256'][:16]} (both incin runs)")
print("  rank 0 offloaded:", {k: v["offloaded"]["calls"] for k, v in s["collectives"].items()},
      "fallback:", s["fallback_reasons"])
print("  DDP step median ms: gloo", [round(x["step_ms_median"], 2) for x in runs["gloo"]],
      "incin", [round(x["step_ms_median"], 2) for x in runs["incin1"]])
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
pass
