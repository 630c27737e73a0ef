#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One rank of lab.torch_checks / lab.torch_numerics (netns-tests/
lab_torch_checks.sh): checks of the torch.distributed backend "incin" that
each rank verifies on its own, one scenario per process group.

  torch_checks.py --check NAME --rank R --world N --master HOST:PORT --out FILE
                  [--backend incin|gloo] [--timeout SECONDS] [--am HOST:PORT] [--job ID]

Scenarios (docs/pytorch.md "Failures" is the policy they check):
  numerics      float SUM: inf/NaN per element as IEEE (float32, float64,
                float16, bfloat16), and values spread over 1e-6..1e6 within
                (n-1)*u*sum|x_i| of the exact sum; results identical on every rank
  late          a rank 25 s late for barrier and for all_reduce (group timeout
                60 s): both complete, no error, still offloaded
  barrier_async barrier() returns only after this rank's earlier async
                all_reduce (on gloo) completed
  argerrors     argument errors raise RuntimeError like gloo's and change
                nothing: the next call is still offloaded (summary counters);
                a non-contiguous tensor on one rank only is offloaded on all
  sparse        a sparse all_reduce reaches gloo (reason sparse), right sum
  empty         0-element tensors in every collective complete (locally)
  monitored     incin.monitored_barrier passes with every rank, and names the
                missing rank when one stays away
  subgroup      new_group subgroups: all_gather_into_tensor, reduce_scatter,
                reduce_scatter_tensor exact on gloo (second_group)
  absent        rank N-1 absent past the group timeout (10 s): every rank's
                call raises within timeout + 10 s, later calls raise naming
                the cause, no rank hangs
  killed        rank N-1 is SIGKILLed: the others' next calls raise within
                timeout + 10 s, later calls raise
  async         offloaded Works are asynchronous: several all_reduce(async_op)
                issued before any wait (rank 1 late: isCompleted false at
                first on the others), waited out of order, right results;
                wait(timeout) raises while the peer is late; a tensor the
                caller dropped stays alive in the Work; an offloaded, a gloo
                and an offloaded call issued back to back in that order
  asyncfail     rank N-1 absent past the timeout (10 s) with two async
                all_reduces queued: both Works raise through wait() (and
                their futures), later calls raise
  teardown      destroy_process_group() with four offloaded all_reduces queued
                (rank 1 late), one with a Python future callback, one whose
                tensor the caller dropped: all complete with right results
                by the time it returns, the callback ran, the shutdown
                summary counts every one (before: a hang, the GIL held while
                waiting for the worker)
  dropcb        the last reference to the group dropped in a future
                callback on its worker with calls queued behind: they
                complete right, the group ends (summary written)
  fallback      no AM (INCIN_AM unset, every call on gloo): bfloat16 all_reduce,
                AVG (float32, bfloat16), all_gather_into_tensor,
                reduce_scatter_tensor (SUM, AVG) equal to a local reference,
                identical on every rank, counted as fallback no_group

Writes {"check", "rank", "failures": [...], "info": {...}} to --out; exit 0
when this rank saw no failure, 1 otherwise, 77 when torch is missing.
"""
import argparse
import json
import math
import os
import signal
import sys
import time
import traceback


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--check", required=True)
    p.add_argument("--backend", default="incin", choices=["incin", "gloo"])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--am", default=os.environ.get("INCLAB_AM", ""))
    p.add_argument("--job", default="")
    p.add_argument("--iface", default="eth0")
    return p.parse_args()


class Ctx:
    def __init__(self, a, torch, dist):
        self.a, self.torch, self.dist = a, torch, dist
        self.rank, self.world = a.rank, a.world
        self.failures = []
        self.info = {}

    def fail(self, msg):
        self.failures.append(msg)

    def summary(self, group=None):
        if self.a.backend != "incin":
            return None
        import incin
        return json.loads(incin.summary_json(group))

    def calls(self, s, coll, path="offloaded"):
        c = s["collectives"].get(coll)
        if c is None:
            return 0
        return c[path]["calls"] if path in ("offloaded", "fallback") else c[path]

    def raises(self, what, fn, pattern):
        """fn() must raise RuntimeError whose message contains pattern."""
        try:
            fn()
        except RuntimeError as e:
            if pattern not in str(e):
                self.fail(f"{what}: raised {str(e)[:300]!r}, want {pattern!r} in it")
            return str(e)
        except Exception as e:  # noqa: BLE001 (the type is what is checked)
            self.fail(f"{what}: raised {type(e).__name__} {str(e)[:200]!r}, want RuntimeError")
            return str(e)
        self.fail(f"{what}: did not raise")
        return ""


# ---------------------------------------------------------------- numerics

UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def check_numerics(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    dtypes = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
              "bfloat16": torch.bfloat16}
    inf, nan = float("inf"), float("nan")
    for name, dt in dtypes.items():
        if c.a.backend == "gloo" and dt == torch.bfloat16:
            continue  # gloo 1.13 has no bfloat16 reductions
        # inf/NaN, per element: the rest of each block (and of the tensor)
        # must stay exact. Sizes: one small call (libinc's gather path) and
        # one of many blocks (block fixed point).
        for n in (64, 20000):
            base = (torch.arange(n) % 17).to(torch.float64)  # exact in every type
            x = base.clone() + rank
            want = base * world + sum(range(world))
            special = {}
            for i in range(0, n, 97):
                kind = (i // 97) % 4
                if kind == 0 and rank == i % world:  # +inf on one rank: +inf
                    x[i] = inf
                elif kind == 1:  # +inf on rank 0, -inf on rank 1: NaN
                    x[i] = inf if rank == 0 else (-inf if rank == 1 else x[i])
                elif kind == 2 and rank == (i + 1) % world:  # NaN on one rank: NaN
                    x[i] = nan
                elif kind == 3 and rank == (i + 2) % world:  # -inf on one rank: -inf
                    x[i] = -inf
                special[i] = (inf, nan, nan, -inf)[kind]
            for i, v in special.items():
                want[i] = v
            t = x.to(dt)
            dist.all_reduce(t)
            got = t.to(torch.float64)
            bad = []
            for i in range(n):
                g, w = got[i].item(), want[i].item()
                if math.isnan(w):
                    ok = math.isnan(g)
                else:
                    ok = g == w
                if not ok:
                    bad.append(f"[{i}] got {g} want {w}")
            if bad:
                c.fail(f"inf/NaN {name} n={n}: {len(bad)} wrong elements, first {bad[:4]}")
        # Values spread over 1e-6..1e6 (float16: its normal range, the sum
        # below its largest finite value), random signs, different per rank.
        lo, hi = {"float16": (6.2e-5, 1.6e4)}.get(name, (1e-6, 1e6))
        n = 4096 if dt == torch.float64 else 20000
        g = torch.Generator().manual_seed(1000 + rank)
        mag = torch.exp(torch.empty(n, dtype=torch.float64).uniform_(math.log(lo), math.log(hi), generator=g))
        sign = torch.where(torch.rand(n, generator=g, dtype=torch.float64) < 0.5, -1.0, 1.0)
        x = (mag * sign).to(dt)
        # Every rank's inputs (exact, in float64) for the exact sum.
        allx = [torch.empty(n, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(allx, x.to(torch.float64))
        t = x.clone()
        dist.all_reduce(t)
        u = UNIT_ROUNDOFF[name]
        worst = 0.0
        bad = []
        for i in range(n):
            vals = [allx[r][i].item() for r in range(world)]
            exact = math.fsum(vals)
            bound = (world - 1) * u * math.fsum(abs(v) for v in vals)
            err = abs(t[i].item() - exact)
            if err > bound:
                bad.append(f"[{i}] {vals} -> {t[i].item()} exact {exact} err {err:.3g} > {bound:.3g}")
            if bound > 0:
                worst = max(worst, err / bound)
        c.info[f"wide_{name}_worst_err_over_bound"] = worst
        if bad:
            c.fail(f"wide range {name}: {len(bad)} of {n} elements beyond (n-1)*u*sum|x|, first {bad[:3]}")
        # Every rank holds the same bytes.
        mine = t.view(torch.int16 if t.element_size() == 2 else
                      (torch.int32 if t.element_size() == 4 else torch.int64)).clone()
        outs = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(outs, mine)
        if any(not torch.equal(o, outs[0]) for o in outs):
            c.fail(f"wide range {name}: the ranks hold different results")


# -------------------------------------------------------------------- late

def check_late(c):
    torch, dist, rank = c.torch, c.dist, c.rank
    late = c.world - 1
    s0 = c.summary()
    for what in ("barrier", "all_reduce"):
        if rank == late:
            time.sleep(25)
        t0 = time.time()
        try:
            if what == "barrier":
                dist.barrier()
            else:
                t = torch.full((1000,), float(rank))
                dist.all_reduce(t)
                if not torch.equal(t, torch.full((1000,), float(sum(range(c.world))))):
                    c.fail("late all_reduce: wrong result")
        except Exception as e:  # noqa: BLE001
            c.fail(f"late {what}: raised {type(e).__name__}: {str(e)[:300]}")
        el = time.time() - t0
        c.info[f"{what}_seconds"] = round(el, 2)
        if rank != late and el < 20:
            c.fail(f"late {what}: returned after {el:.1f} s, before the late rank came (25 s)")
    s1 = c.summary()
    if s1 is not None:
        if s1["group"] != "ok":
            c.fail(f"group {s1['group']} after the late rank ({s1['group_detail']})")
        for coll in ("barrier", "allreduce"):
            if c.calls(s1, coll) - c.calls(s0, coll) != 1:
                c.fail(f"{coll} with a late rank was not offloaded: {s1['collectives'].get(coll)}")
    # The group still works afterwards.
    t = torch.ones(10)
    dist.all_reduce(t)
    if not torch.equal(t, torch.full((10,), float(c.world))):
        c.fail("all_reduce after the late rank: wrong result")


# ----------------------------------------------------------- barrier_async

def check_barrier_async(c):
    torch, dist, rank = c.torch, c.dist, c.rank
    # PRODUCT runs on gloo (unsupported_op) in a worker thread; rank 1 issues
    # it 2 s late, so everyone's is still running when barrier() is called.
    n = 4 << 20
    if rank == 1:
        time.sleep(2)
    t = torch.ones(n)
    work = dist.all_reduce(t, op=dist.ReduceOp.PRODUCT, async_op=True)
    done_before = work.is_completed()
    dist.barrier()
    done_after = work.is_completed()
    c.info["async_done_before_barrier"] = done_before
    if not done_after:
        c.fail("barrier() returned while an earlier async all_reduce was still running")
    work.wait()
    if not torch.equal(t, torch.ones(n)):
        c.fail("async all_reduce PRODUCT: wrong result")
    s = c.summary()
    if s is not None and c.calls(s, "barrier") != 1:
        c.fail(f"barrier not offloaded: {s['collectives'].get('barrier')}")


# --------------------------------------------------------------- argerrors

def check_argerrors(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    s0 = c.summary()
    t = torch.ones(8)
    msg = c.raises("broadcast(src=world)", lambda: dist.broadcast(t, src=world), "invalid root rank: %d" % world)
    c.info["broadcast_error"] = msg.splitlines()[0] if msg else ""
    outs = [torch.zeros(8) for _ in range(world - 1)]
    c.raises("all_gather with world-1 outputs", lambda: dist.all_gather(outs, t),
             f"invalid output tensor list at index 0 (expected length {world}, got {world - 1})")
    outs = [torch.zeros(9) for _ in range(world)]
    c.raises("all_gather with outputs of another size", lambda: dist.all_gather(outs, t), "invalid tensor size")
    if c.a.backend == "incin":
        o = torch.zeros(8 * world + 1)
        c.raises("all_gather_into_tensor of a wrong size", lambda: dist.all_gather_into_tensor(o, t),
                 "output tensor size must be equal to world_size times input tensor size")
        o = torch.zeros(3)
        c.raises("reduce_scatter_tensor of a wrong size", lambda: dist.reduce_scatter_tensor(o, t),
                 "input tensor must be the same size as output size times world size")
    # The group keeps working, on the switches.
    t = torch.full((100,), float(rank))
    dist.all_reduce(t)
    if not torch.equal(t, torch.full((100,), float(sum(range(world))))):
        c.fail("all_reduce after the argument errors: wrong result")
    t = torch.full((5,), float(rank))
    dist.broadcast(t, src=world - 1)
    if not torch.equal(t, torch.full((5,), float(world - 1))):
        c.fail("broadcast after the argument errors: wrong result")
    # A non-contiguous input on odd ranks only: every rank takes the same
    # path (the switch, through a copy).
    src = torch.arange(16, dtype=torch.float32).view(4, 4) + 100 * rank
    inp = src[:, 1] if rank % 2 else src[:, 1].contiguous()
    outs = [torch.zeros(4) for _ in range(world)]
    dist.all_gather(outs, inp)
    for r in range(world):
        want = torch.arange(16, dtype=torch.float32).view(4, 4)[:, 1] + 100 * r
        if not torch.equal(outs[r], want):
            c.fail(f"all_gather with non-contiguous input on some ranks: block {r} wrong")
    s1 = c.summary()
    if s1 is not None:
        if s1["group"] != "ok":
            c.fail(f"group {s1['group']} after argument errors ({s1['group_detail']})")
        for coll in ("allreduce", "broadcast", "allgather"):
            d = c.calls(s1, coll) - c.calls(s0, coll)
            if d != 1:
                c.fail(f"{coll} after argument errors: {d} offloaded, want 1")
        if s1["totals"]["fallback"] != s0["totals"]["fallback"]:
            c.fail(f"argument errors caused fallbacks: {s1['fallback_reasons']}")
        c.info["argument_errors_counted"] = s1["totals"]["argument_errors"]


# ------------------------------------------------------------------ sparse

def check_sparse(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    i = torch.tensor([[rank, 7]])
    v = torch.tensor([1.0 + rank, 10.0])
    t = torch.sparse_coo_tensor(i, v, (8,))
    try:
        dist.all_reduce(t)
        want = torch.zeros(8)
        for r in range(world):
            want[r] += 1.0 + r
        want[7] = 10.0 * world
        if not torch.equal(t.to_dense(), want):
            c.fail(f"sparse all_reduce: got {t.to_dense().tolist()} want {want.tolist()}")
    except Exception as e:  # noqa: BLE001
        c.fail(f"sparse all_reduce raised {type(e).__name__}: {str(e)[:300]}")
    s = c.summary()
    if s is not None:
        if s["collectives"].get("allreduce", {}).get("fallback_reasons", {}).get("sparse") != 1:
            c.fail(f"sparse all_reduce not counted as fallback sparse: {s['collectives'].get('allreduce')}")
        if s["group"] != "ok":
            c.fail(f"group {s['group']} after a sparse all_reduce")


# ------------------------------------------------------------------- empty

def check_empty(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    e = torch.empty(0)

    def outs():
        return [torch.empty(0) for _ in range(world)]

    calls = [
        ("all_reduce", lambda: dist.all_reduce(torch.empty(0))),
        ("all_reduce async", lambda: dist.all_reduce(torch.empty(0), async_op=True).wait()),
        ("broadcast", lambda: dist.broadcast(torch.empty(0), src=1)),
        ("all_gather", lambda: dist.all_gather(outs(), e)),
        ("reduce", lambda: dist.reduce(torch.empty(0), dst=0)),
        ("gather", lambda: dist.gather(e, outs() if rank == 0 else None, dst=0)),
        ("scatter", lambda: dist.scatter(torch.empty(0), outs() if rank == 0 else None, src=0)),
        ("all_to_all_single", lambda: dist.all_to_all_single(torch.empty(0), torch.empty(0))),
        ("all_reduce_coalesced", lambda: dist.all_reduce_coalesced([torch.empty(0), torch.empty(0, 3)])),
        ("all_gather_coalesced", lambda: dist.all_gather_coalesced([[torch.empty(0)] for _ in range(world)],
                                                                   [torch.empty(0)])),
        ("all_gather_object-free barrier", lambda: dist.barrier()),
    ]
    if c.a.backend == "incin":  # gloo 1.13 has none of these
        calls += [
            ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(torch.empty(0), e)),
            ("reduce_scatter", lambda: dist.reduce_scatter(torch.empty(0), outs())),
            ("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(torch.empty(0), torch.empty(0))),
        ]
    for name, fn in calls:
        try:
            fn()
        except Exception as ex:  # noqa: BLE001
            c.fail(f"empty {name}: raised {type(ex).__name__}: {str(ex)[:200]}")
    # And the group still works.
    t = torch.ones(3)
    dist.all_reduce(t)
    if not torch.equal(t, torch.full((3,), float(world))):
        c.fail("all_reduce after the empty calls: wrong result")
    s = c.summary()
    if s is not None:
        c.info["local"] = {k: v["local"] for k, v in s["collectives"].items() if v["local"]}
        if s["totals"]["local"] < len(calls) - 1:
            c.fail(f"only {s['totals']['local']} calls completed locally: {c.info['local']}")
        if s["group"] != "ok":
            c.fail(f"group {s['group']} after the empty calls")


# --------------------------------------------------------------- monitored

def check_monitored(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    from datetime import timedelta
    mb = dist.monitored_barrier
    if c.a.backend == "incin":
        import incin
        mb = incin.monitored_barrier
        # torch's own refuses the backend name (why incin has its own).
        c.raises("dist.monitored_barrier on an incin group", lambda: dist.monitored_barrier(),
                 "only implemented for GLOO backend")
    t0 = time.time()
    try:
        mb(timeout=20.0)  # seconds as a number, as torch's own takes them
        mb(timeout=timedelta(seconds=20))
    except Exception as e:  # noqa: BLE001
        c.fail(f"monitored_barrier with every rank raised {type(e).__name__}: {str(e)[:300]}")
    c.info["monitored_all_seconds"] = round(time.time() - t0, 2)
    # The last rank stays away: rank 0 names it within the timeout.
    dist.barrier()
    if rank != world - 1:
        t0 = time.time()
        msg = c.raises("monitored_barrier without the last rank",
                       lambda: mb(timeout=timedelta(seconds=5), wait_all_ranks=True),
                       f"Ranks {world - 1} failed to pass monitoredBarrier" if rank == 0 else "")
        el = time.time() - t0
        c.info["monitored_missing_seconds"] = round(el, 2)
        c.info["monitored_missing_error"] = msg.splitlines()[0][:300] if msg else ""
        if el > 5 + 10:
            c.fail(f"monitored_barrier without the last rank took {el:.1f} s (timeout 5 s)")
    else:
        time.sleep(8)  # until the others gave up


# ---------------------------------------------------------------- subgroup

def check_subgroup(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    groups = {"all": list(range(world)), "pair": [1, 2]}
    for gname, ranks in groups.items():
        g = dist.new_group(ranks, backend=c.a.backend)
        if rank not in ranks:
            continue
        n = len(ranks)
        me = ranks.index(rank)
        inp = torch.arange(5, dtype=torch.int64) + 1000 * me
        out = torch.zeros(5 * n, dtype=torch.int64)
        try:
            dist.all_gather_into_tensor(out, inp, group=g)
            want = torch.cat([torch.arange(5, dtype=torch.int64) + 1000 * r for r in range(n)])
            if not torch.equal(out, want):
                c.fail(f"{gname}: all_gather_into_tensor got {out.tolist()}")
            # A non-contiguous output (a column of a matrix).
            m = torch.zeros(5 * n, 2, dtype=torch.int64)
            dist.all_gather_into_tensor(m[:, 1], inp, group=g)
            if not torch.equal(m[:, 1], want) or m[:, 0].abs().sum() != 0:
                c.fail(f"{gname}: all_gather_into_tensor into a non-contiguous output wrong")
            x = torch.arange(4 * n, dtype=torch.int64) * (me + 1)
            o = torch.zeros(4, dtype=torch.int64)
            dist.reduce_scatter_tensor(o, x, group=g)
            want = torch.arange(4 * me, 4 * me + 4, dtype=torch.int64) * sum(range(1, n + 1))
            if not torch.equal(o, want):
                c.fail(f"{gname}: reduce_scatter_tensor got {o.tolist()} want {want.tolist()}")
            if not torch.equal(x, torch.arange(4 * n, dtype=torch.int64) * (me + 1)):
                c.fail(f"{gname}: reduce_scatter_tensor changed its input")
            ins = [torch.full((3,), float(me * 10 + j)) for j in range(n)]
            o = torch.zeros(3)
            dist.reduce_scatter(o, ins, group=g)
            want = torch.full((3,), float(sum(q * 10 + me for q in range(n))))
            if not torch.equal(o, want):
                c.fail(f"{gname}: reduce_scatter got {o.tolist()} want {want.tolist()}")
            o = torch.zeros(3)
            dist.reduce_scatter(o, ins, op=dist.ReduceOp.MAX, group=g)
            if not torch.equal(o, torch.full((3,), float((n - 1) * 10 + me))):
                c.fail(f"{gname}: reduce_scatter MAX got {o.tolist()}")
        except Exception as e:  # noqa: BLE001
            c.fail(f"{gname}: raised {type(e).__name__}: {str(e)[:300]}")
        s = c.summary(g)
        if s is not None:
            c.info[f"{gname}_group"] = s["group"]
            c.info[f"{gname}_fallback"] = s["fallback_reasons"]
    dist.barrier()


# ---------------------------------------------------------- absent, killed

def after_failure(c, label):
    """Every later call on the group raises at once, naming the failure."""
    torch, dist = c.torch, c.dist
    for name, fn in (("all_reduce", lambda: dist.all_reduce(torch.ones(4))),
                     ("reduce (gloo)", lambda: dist.reduce(torch.ones(4), dst=0)),
                     ("barrier", lambda: dist.barrier())):
        t0 = time.time()
        c.raises(f"{label}: {name} after the failure", fn, "failed earlier")
        if time.time() - t0 > 5:
            c.fail(f"{label}: {name} after the failure took {time.time() - t0:.1f} s to raise")
    s = c.summary()
    if s is not None and s["group"] != "failed":
        c.fail(f"{label}: group state {s['group']}, want failed")


def check_absent(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    timeout = c.a.timeout
    t = torch.ones(10)
    dist.all_reduce(t)  # the group works
    if rank == world - 1:
        time.sleep(timeout + 5)  # absent past the timeout
    t0 = time.time()
    msg = c.raises("all_reduce with a rank absent", lambda: dist.all_reduce(torch.ones(10)), "")
    el = time.time() - t0
    c.info["raise_seconds"] = round(el, 2)
    c.info["error"] = msg.splitlines()[0][:300] if msg else ""
    limit = timeout + 10
    if el > limit:
        c.fail(f"the failed all_reduce raised after {el:.1f} s, more than timeout + 10 s")
    if rank != world - 1 and el < timeout - 1:
        c.fail(f"the all_reduce raised after {el:.1f} s, before the {timeout:.0f} s timeout")
    after_failure(c, "absent")


def check_killed(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    timeout = c.a.timeout
    t = torch.ones(10)
    dist.all_reduce(t)
    dist.barrier()
    if rank == world - 1:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(1)
    t0 = time.time()
    msg = c.raises("all_reduce with a rank killed", lambda: dist.all_reduce(torch.ones(10)), "")
    el = time.time() - t0
    c.info["raise_seconds"] = round(el, 2)
    c.info["error"] = msg.splitlines()[0][:300] if msg else ""
    if el > timeout + 10:
        c.fail(f"the failed all_reduce raised after {el:.1f} s, more than timeout + 10 s")
    after_failure(c, "killed")


# ------------------------------------------------------------------ async

def check_async(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    from datetime import timedelta
    n = 1 << 16
    if rank == 1:
        time.sleep(2)  # the others' Works cannot complete before rank 1 comes
    ts = [torch.full((n,), float(rank + 10 * i)) for i in range(4)]
    ws = [dist.all_reduce(t, async_op=True) for t in ts]
    first = [w.is_completed() for w in ws]
    c.info["completed_at_issue"] = first
    if rank != 1 and all(first):
        c.fail("every all_reduce Work was complete when issued while rank 1 was 2 s late")
    futs = [w.get_future() for w in ws]
    for i in reversed(range(len(ws))):
        ws[i].wait()
    want_base = world * (world - 1) / 2
    for i, t in enumerate(ts):
        want = want_base + world * 10 * i
        if not torch.equal(t, torch.full((n,), float(want))):
            c.fail(f"async all_reduce {i}: got {t[:3].tolist()}, want {want}")
        if not ws[i].is_completed():
            c.fail(f"async all_reduce {i}: not completed after wait()")
        if not torch.equal(futs[i].wait()[0], t):
            c.fail(f"async all_reduce {i}: future value differs from the tensor")
    # wait(timeout) is honoured: rank 1 comes 3 s late.
    if rank == 1:
        time.sleep(3)
    w = dist.all_reduce(torch.ones(8), async_op=True)
    if rank != 1:
        t0 = time.time()
        c.raises("wait(timeout=200 ms) while rank 1 is 3 s late",
                 lambda: w.wait(timeout=timedelta(milliseconds=200)), "")
        if time.time() - t0 > 2:
            c.fail(f"wait(timeout=200 ms) returned after {time.time() - t0:.1f} s")
    w.wait()
    if not torch.equal(w.result()[0], torch.full((8,), float(world))):
        c.fail(f"all_reduce after wait(timeout): {w.result()[0].tolist()}")
    # A tensor the caller no longer holds lives in its Work until it completes.
    w = dist.all_reduce(torch.full((n,), 2.0), async_op=True)
    import gc
    gc.collect()
    w.wait()
    if not torch.equal(w.result()[0], torch.full((n,), 2.0 * world)):
        c.fail("all_reduce of a dropped tensor: wrong result")
    # Offloaded, gloo (PRODUCT), offloaded, issued back to back: the same
    # order on every rank, every result right.
    a, p, b = torch.full((n,), 1.0), torch.full((n,), 2.0), torch.full((n,), float(rank))
    w1 = dist.all_reduce(a, async_op=True)
    w2 = dist.all_reduce(p, op=dist.ReduceOp.PRODUCT, async_op=True)
    w3 = dist.all_reduce(b, async_op=True)
    for w in (w3, w2, w1):
        w.wait()
    if not (torch.equal(a, torch.full((n,), float(world))) and torch.equal(p, torch.full((n,), 2.0 ** world))
            and torch.equal(b, torch.full((n,), want_base))):
        c.fail(f"mixed offloaded/gloo calls: {a[0].item()} {p[0].item()} {b[0].item()}")
    dist.barrier()
    s = c.summary()
    if s is not None and c.calls(s, "allreduce") < 8:
        c.fail(f"all_reduce not offloaded: {s['collectives'].get('allreduce')}")


def check_asyncfail(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    timeout = c.a.timeout
    dist.all_reduce(torch.ones(10))  # the group works
    if rank == world - 1:
        time.sleep(timeout + 5)  # absent past the timeout
    t0 = time.time()
    w1 = dist.all_reduce(torch.ones(10), async_op=True)
    try:
        w2 = dist.all_reduce(torch.ones(10), async_op=True)
    except RuntimeError as e:
        # The absent rank comes after the tree failed: its worker may fail
        # the first call (at once) before the second is issued, which then
        # raises on issue, as every call after a failure does.
        if rank != world - 1 or "failed earlier" not in str(e):
            raise
        w2 = None
    if time.time() - t0 > 1:
        c.fail(f"issuing two async all_reduces took {time.time() - t0:.1f} s")
    f2 = w2.get_future() if w2 is not None else None
    msg2 = c.raises("wait() on the second queued all_reduce", w2.wait, "") if w2 is not None else "raised on issue"
    msg1 = c.raises("wait() on the first all_reduce", w1.wait, "")
    el = time.time() - t0
    c.info["raise_seconds"] = round(el, 2)
    c.info["errors"] = [m.splitlines()[0][:200] if m else "" for m in (msg1, msg2)]
    if el > timeout + 10:
        c.fail(f"the failed all_reduces raised after {el:.1f} s, more than timeout + 10 s")
    try:
        if f2 is not None:
            f2.wait()
            c.fail("the failed all_reduce's future did not raise")
    except RuntimeError:
        pass
    after_failure(c, "asyncfail")


# ------------------------------------------------------ teardown, dropcb

def shutdown_summary(c, wait_s=15):
    """The summary the group's shutdown wrote (INCIN_TORCH_SUMMARY_JSON, set
    by main for these checks), or None when none came within wait_s."""
    t0 = time.time()
    while time.time() - t0 < wait_s:
        try:
            with open(c.shutdown_json) as f:
                return json.load(f)
        except (OSError, ValueError):
            time.sleep(0.05)
    return None


def expect_shutdown_offloads(c, want, no_summary):
    """The summary the group's end wrote counts `want` offloaded all_reduces
    (every one queued before it ended ran); `no_summary` says what its
    absence means."""
    s = shutdown_summary(c)
    if s is None:
        c.fail(f"{no_summary} (no summary at {c.shutdown_json})")
    elif c.calls(s, "allreduce") != want:
        c.fail(f"summary at shutdown: {c.calls(s, 'allreduce')} all_reduces offloaded, want {want} "
               "(every queued one)")


def queue_four(c, n):
    """Four async all_reduces, issued while rank 1 is 2 s late (so they are
    still queued on the others), and one whose tensor and Work the caller
    drops at once (the worker then drops the last reference of a tensor
    Python let go of, which takes the GIL)."""
    torch, dist, rank = c.torch, c.dist, c.rank
    if rank == 1:
        time.sleep(2)
    ts = [torch.full((n,), float(rank + 10 * i)) for i in range(4)]
    ws = [dist.all_reduce(t, async_op=True) for t in ts]
    dist.all_reduce(torch.full((n,), 1.0), async_op=True)
    return ts, ws


def check_queued_results(c, label, ts, ws, n):
    want_base = c.world * (c.world - 1) / 2
    for i, (t, w) in enumerate(zip(ts, ws)):
        try:
            w.wait()
        except Exception as e:  # noqa: BLE001
            c.fail(f"{label}: queued all_reduce {i} raised {type(e).__name__}: {str(e)[:300]}")
            continue
        want = want_base + c.world * 10 * i
        if not torch_equal_full(c, t, n, want):
            c.fail(f"{label}: queued all_reduce {i}: got {t[:3].tolist()}, want {want}")


def torch_equal_full(c, t, n, v):
    return c.torch.equal(t, c.torch.full((n,), float(v)))


def check_teardown(c):
    """destroy_process_group() with offloaded calls still queued, one of them
    with a Python callback on its future: the group's end runs them first
    (as gloo's does) and does not hold the GIL while it waits for the
    worker, which needs it for the callback (this hung before)."""
    torch, dist = c.torch, c.dist
    import threading
    n = 1 << 14
    dist.all_reduce(torch.ones(4))  # the worker thread runs
    ts, ws = queue_four(c, n)
    ran = []
    ws[3].get_future().then(lambda f: ran.append(threading.get_ident()) or f.value())
    c.info["completed_at_destroy"] = [w.is_completed() for w in ws]
    t0 = time.time()
    dist.destroy_process_group()
    c.info["destroy_seconds"] = round(time.time() - t0, 2)
    for w in ws:
        if not w.is_completed():
            c.fail("a queued all_reduce was not complete when destroy_process_group returned")
            break
    check_queued_results(c, "teardown", ts, ws, n)
    if not ran:
        c.fail("the Python callback on a queued all_reduce's future never ran")
    elif ran[0] == threading.get_ident() and c.rank != 1 and not all(c.info["completed_at_destroy"]):
        c.fail("the future callback ran on the main thread, not on the worker")
    expect_shutdown_offloads(c, 6, "destroy_process_group wrote no summary")


def check_dropcb(c):
    """The last reference to the group drops inside a future callback, on
    the group's worker thread, with offloaded calls queued behind it: the
    group ends there without waiting for itself, runs the queued calls first
    (right results), and its thread touches nothing of it afterwards (a
    use-after-free before)."""
    torch, dist = c.torch, c.dist
    import threading
    n = 1 << 14
    dist.all_reduce(torch.ones(4))
    holder = [dist.distributed_c10d._get_default_group()]
    ts, ws = queue_four(c, n)
    where = []

    def drop(f):
        where.append(threading.get_ident())
        holder.clear()  # the last reference: the group ends here
        return f.value()

    ws[1].get_future().then(drop)
    dist.destroy_process_group()  # c10d lets go; holder keeps the group
    check_queued_results(c, "dropcb", ts, ws, n)
    if not where:
        c.fail("the callback that drops the group never ran")
    else:
        c.info["dropped_on_worker"] = where[0] != threading.get_ident()
    expect_shutdown_offloads(c, 6, "the group did not end when its last reference dropped")


# --------------------------------------------------------------- fallback

def check_fallback(c):
    torch, dist, rank, world = c.torch, c.dist, c.rank, c.world
    s = c.summary()
    if s["group"] != "no_group":
        c.fail(f"group state {s['group']}, want no_group (INCIN_AM unset)")
    g = torch.Generator().manual_seed(7)
    per_rank = [torch.randn(1000, generator=g) * 100 for _ in range(world)]  # every rank's input, on each rank
    mine = per_rank[rank]

    def same_everywhere(what, t):
        b = t.contiguous().view(torch.uint8)  # the bytes (gloo 1.13 gathers no bfloat16)
        outs = [torch.empty_like(b) for _ in range(world)]
        dist.all_gather(outs, b)
        if any(not torch.equal(o, b) for o in outs):
            c.fail(f"{what}: results differ between ranks")

    # bfloat16 SUM of exactly representable small values: exact.
    t = (torch.arange(64, dtype=torch.float32) * 0.5 + rank).to(torch.bfloat16)
    dist.all_reduce(t)
    ref = sum(torch.arange(64, dtype=torch.float32) * 0.5 + r for r in range(world)).to(torch.bfloat16)
    if not torch.equal(t, ref):
        c.fail(f"bfloat16 all_reduce SUM: {t[:4].tolist()}, want {ref[:4].tolist()}")
    # bfloat16 MAX.
    t = mine.to(torch.bfloat16)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    ref = torch.stack(per_rank).to(torch.bfloat16).max(dim=0).values
    if not torch.equal(t, ref):
        c.fail("bfloat16 all_reduce MAX differs from the local reference")
    # AVG, float32 and bfloat16: within rounding of the local mean, and the
    # same bytes on every rank.
    for dt, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1e-2)):
        t = mine.to(dt).clone()  # .to() of the same dtype is mine itself
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        ref = torch.stack([x.to(dt).double() for x in per_rank]).mean(dim=0)
        err = ((t.double() - ref).abs() / ref.abs().clamp(min=1.0)).max().item()
        if err > tol:
            c.fail(f"AVG {dt}: relative error {err:.3g} > {tol}")
        same_everywhere(f"AVG {dt}", t)
    # Exact AVG: integers summed, divided by a power of two.
    t = torch.arange(16, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    ref = torch.arange(16, dtype=torch.float32) * sum(r + 1 for r in range(world)) / world
    if not torch.equal(t, ref):
        c.fail(f"AVG float32 of integers: {t[:4].tolist()}, want {ref[:4].tolist()}")
    # all_gather_into_tensor.
    out = torch.empty(world * 1000)
    dist.all_gather_into_tensor(out, mine)
    if not torch.equal(out, torch.cat(per_rank)):
        c.fail("all_gather_into_tensor differs from the local reference")
    # reduce_scatter_tensor SUM (integers: exact) and AVG.
    ints = [torch.arange(world * 8, dtype=torch.int64) * (r + 1) for r in range(world)]
    out = torch.empty(8, dtype=torch.int64)
    dist.reduce_scatter_tensor(out, ints[rank])
    ref = sum(ints).narrow(0, rank * 8, 8)
    if not torch.equal(out, ref):
        c.fail(f"reduce_scatter_tensor SUM: {out.tolist()}, want {ref.tolist()}")
    big = [x.repeat(world)[: world * 250] for x in per_rank]
    out = torch.empty(250)
    dist.reduce_scatter_tensor(out, big[rank], op=dist.ReduceOp.AVG)
    ref = torch.stack([x.double() for x in big]).mean(dim=0).narrow(0, rank * 250, 250)
    if ((out.double() - ref).abs() / ref.abs().clamp(min=1.0)).max().item() > 1e-5:
        c.fail("reduce_scatter_tensor AVG differs from the local reference")
    # bfloat16 reduce_scatter_tensor SUM (small integers: exact).
    bf = [(torch.arange(world * 4, dtype=torch.float32) + r).to(torch.bfloat16) for r in range(world)]
    out = torch.empty(4, dtype=torch.bfloat16)
    dist.reduce_scatter_tensor(out, bf[rank])
    ref = sum(x.float() for x in bf).to(torch.bfloat16).narrow(0, rank * 4, 4)
    if not torch.equal(out, ref):
        c.fail(f"bfloat16 reduce_scatter_tensor: {out.tolist()}, want {ref.tolist()}")
    s = c.summary()
    ar = s["collectives"].get("allreduce", {})
    if ar.get("fallback_reasons", {}).get("no_group", 0) < 5:
        c.fail(f"allreduce fallbacks not counted as no_group: {ar}")
    for coll in ("_allgather_base", "_reduce_scatter_base"):
        if s["collectives"].get(coll, {}).get("fallback", {}).get("calls", 0) < 1:
            c.fail(f"{coll} fallback not counted: {s['collectives'].get(coll)}")


CHECKS = {"numerics": check_numerics, "late": check_late, "barrier_async": check_barrier_async,
          "argerrors": check_argerrors, "sparse": check_sparse, "empty": check_empty,
          "monitored": check_monitored, "subgroup": check_subgroup, "absent": check_absent,
          "killed": check_killed, "async": check_async, "asyncfail": check_asyncfail,
          "fallback": check_fallback, "teardown": check_teardown, "dropcb": check_dropcb}
# Checks that destroy their group themselves (main does not).
SELF_DESTROYING = ("teardown", "dropcb")


def main():
    a = parse()
    if a.check not in CHECKS:
        sys.exit(f"unknown check {a.check}; one of {', '.join(CHECKS)}")
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"SKIP: torch is not importable: {e}", file=sys.stderr)
        return 77
    from datetime import timedelta
    os.environ.setdefault("GLOO_SOCKET_IFNAME", a.iface)
    if a.backend == "incin":
        if a.check == "fallback":
            os.environ.pop("INCIN_AM", None)  # no AM: every call on gloo
        elif a.am:
            os.environ["INCIN_AM"] = a.am
        if a.job:
            os.environ["INCIN_JOB_ID"] = a.job
        os.environ["INCIN_IFACE"] = a.iface
        os.environ.setdefault("INCIN_TORCH_SUMMARY", "all")
        import incin  # noqa: F401
    shutdown_json = f"{a.out}.shutdown-{a.rank}.json"
    if a.backend == "incin" and a.check in SELF_DESTROYING:
        # The group's summary at shutdown, which these checks read back.
        if os.path.exists(shutdown_json):
            os.unlink(shutdown_json)
        os.environ["INCIN_TORCH_SUMMARY_JSON"] = a.out + ".shutdown-%r.json"
    torch.set_num_threads(1)
    dist.init_process_group(a.backend, init_method=f"tcp://{a.master}", rank=a.rank, world_size=a.world,
                            timeout=timedelta(seconds=a.timeout))
    c = Ctx(a, torch, dist)
    c.shutdown_json = shutdown_json
    if a.backend == "incin" and a.check != "fallback":
        s = c.summary()
        if s["group"] != "ok":
            c.fail(f"no libinc group: {s['group']} ({s['group_detail']})")
    t0 = time.time()
    try:
        CHECKS[a.check](c)
    except Exception:  # noqa: BLE001 (reported as a failure of this rank)
        c.fail("unexpected exception: " + traceback.format_exc()[-1500:])
    c.info["seconds"] = round(time.time() - t0, 2)
    if a.backend == "incin" and a.check not in SELF_DESTROYING:
        c.info["summary"] = c.summary()
    doc = {"check": a.check, "backend": a.backend, "rank": a.rank, "failures": c.failures, "info": c.info}
    with open(a.out, "w") as f:
        json.dump(doc, f)
    for m in c.failures:
        print(f"rank {a.rank}: FAIL {a.check}: {m}", file=sys.stderr)
    print(f"rank {a.rank}: {a.check}: {'ok' if not c.failures else '%d failures' % len(c.failures)}")
    sys.stdout.flush()
    # A failed group may not be torn down cleanly (gloo peers gone): leave
    # without waiting for its destructor.
    if a.check in ("absent", "asyncfail", "killed", "monitored"):
        os._exit(0 if not c.failures else 1)
    if a.check not in SELF_DESTROYING:
        dist.destroy_process_group()
    return 0 if not c.failures else 1


if __name__ == "__main__":
    sys.exit(main())
