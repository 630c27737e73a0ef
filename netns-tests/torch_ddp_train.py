#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One rank of lab.torch_ddp (netns-tests/lab_torch_ddp.sh): checks the
collectives of a torch.distributed backend against known values, then trains
a small MLP with DistributedDataParallel on seeded synthetic data and writes
the per-step losses and a hash of the final parameters' bytes as JSON.

  torch_ddp_train.py --backend incin|gloo --rank R --world N --master HOST:PORT
                     --out FILE [--steps 300] [--am HOST:PORT] [--job ID] [--iface eth0]
                     [--summary-json PATH] [--no-checks] [--bench]

With --backend incin the libinc settings come from --am/--job/--iface
(INCIN_AM, INCIN_JOB_ID, INCIN_IFACE). Exit 0 when every check passed,
1 when one was wrong, 77 when torch cannot be imported.
"""
import argparse
import hashlib
import json
import os
import sys
import time


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", required=True, choices=["incin", "gloo"])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master", required=True, help="HOST:PORT of the TCPStore (rank 0's address)")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--am", default="")
    p.add_argument("--job", default="")
    p.add_argument("--iface", default="eth0")
    p.add_argument("--summary-json", default="")
    p.add_argument("--no-checks", action="store_true", help="skip the collective checks before training")
    p.add_argument("--bench", action="store_true", help="time the steps (no per-step loss printing)")
    return p.parse_args()


def check_collectives(dist, torch, rank, world, backend):
    """Every offloaded collective and a few that must fall back, each checked
    element by element against the value it must have. Returns the failures."""
    bad = []

    def expect(name, got, want):
        if not torch.equal(got, want):
            bad.append(f"{name}: got {got.tolist()[:8]} want {want.tolist()[:8]}")

    ranks = torch.arange(world)
    # all_reduce: SUM/MIN/MAX over every offloaded dtype, with exact values.
    # (gloo 1.13 has no bfloat16; values stay exact integers in 16-bit floats.)
    dtypes = [torch.float32, torch.float16, torch.float64, torch.int32, torch.int64]
    if backend == "incin":
        dtypes.append(torch.bfloat16)
    for dtype in dtypes:
        base = (torch.arange(1001) % 50).to(dtype)
        for op, want in ((dist.ReduceOp.SUM, base * world + (ranks.sum().item())),
                         (dist.ReduceOp.MIN, base),
                         (dist.ReduceOp.MAX, base + (world - 1))):
            t = base + rank
            t = t.to(dtype)
            dist.all_reduce(t, op=op)
            expect(f"all_reduce {dtype} {op}", t, want.to(dtype))
    # BAND/BOR/BXOR on the integer types, every bit pattern per rank
    # different (an odd int32 count: the switch works on 64-bit words).
    for dtype, n in ((torch.int32, 1001), (torch.int64, 1000)):
        def bits(r, n=n, dtype=dtype):
            i = torch.arange(n, dtype=torch.int64)
            return ((i * 2654435761 + (r + 1) * 40503) ^ (i << (r + 3))).to(dtype)
        for op, fold in ((dist.ReduceOp.BAND, lambda a, b: a & b), (dist.ReduceOp.BOR, lambda a, b: a | b),
                         (dist.ReduceOp.BXOR, lambda a, b: a ^ b)):
            want = bits(0)
            for r in range(1, world):
                want = fold(want, bits(r))
            t = bits(rank)
            dist.all_reduce(t, op=op)
            expect(f"all_reduce {dtype} {op}", t, want)
    # broadcast from the last rank: 4-byte multiples and an odd byte count.
    for n, dtype in ((7, torch.float32), (5, torch.uint8), (3001, torch.int64)):
        t = torch.full((n,), rank + 1).to(dtype)
        dist.broadcast(t, src=world - 1)
        expect(f"broadcast {dtype} x{n}", t, torch.full((n,), world).to(dtype))
    # all_gather of int64 and of 3 bytes (padded blocks).
    for n, dtype in ((513, torch.int64), (3, torch.uint8)):
        outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, torch.full((n,), rank + 10).to(dtype))
        for r in range(world):
            expect(f"all_gather {dtype} block {r}", outs[r], torch.full((n,), r + 10).to(dtype))
    dist.barrier()
    if backend == "incin":
        # gloo 1.13 has neither reduce_scatter nor the *_tensor forms.
        out = torch.zeros(100, dtype=torch.int32)
        dist.reduce_scatter(out, [torch.full((100,), rank * world + r, dtype=torch.int32) for r in range(world)])
        expect("reduce_scatter", out, torch.full((100,), sum(q * world + rank for q in range(world)),
                                                 dtype=torch.int32))
        out = torch.zeros(world * 9, dtype=torch.float32)
        dist.all_gather_into_tensor(out, torch.full((9,), float(rank)))
        expect("all_gather_into_tensor", out, torch.arange(world).repeat_interleave(9).float())
        out = torch.zeros(6, dtype=torch.int64)
        dist.reduce_scatter_tensor(out, torch.arange(6 * world, dtype=torch.int64) * (rank + 1))
        expect("reduce_scatter_tensor", out,
               torch.arange(6 * rank, 6 * rank + 6, dtype=torch.int64) * sum(range(1, world + 1)))
        # A non-contiguous column: offloaded through a copy (gloo 1.13 would
        # reduce the first 8 floats of the storage instead).
        m = torch.full((8, 4), float(rank))
        dist.all_reduce(m[:, 1])
        want = torch.full((8, 4), float(rank))
        want[:, 1] = float(sum(range(world)))
        expect("all_reduce noncontiguous", m, want)
        m = torch.full((6, 3), float(rank))
        dist.broadcast(m[:, 2], src=1)
        want = torch.full((6, 3), float(rank))
        want[:, 2] = 1.0
        expect("broadcast noncontiguous", m, want)
    # These fall back to gloo under incin (each reason counted and logged).
    t = torch.full((10,), 2.0)
    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)  # unsupported_op
    expect("all_reduce PRODUCT", t, torch.full((10,), 2.0 ** world))
    t = torch.full((10,), rank, dtype=torch.uint8)
    dist.all_reduce(t)  # unsupported_dtype
    expect("all_reduce uint8", t, torch.full((10,), sum(range(world)), dtype=torch.uint8))
    t = torch.full((5,), float(rank))
    dist.reduce(t, dst=0)  # unsupported_collective
    if rank == 0:
        expect("reduce", t, torch.full((5,), float(sum(range(world)))))
    return bad


def main():
    a = parse()
    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
    except ImportError as e:
        print(f"SKIP: torch is not importable: {e}", file=sys.stderr)
        return 77
    os.environ.setdefault("GLOO_SOCKET_IFNAME", a.iface)
    if a.backend == "incin":
        if a.am:
            os.environ["INCIN_AM"] = a.am
        if a.job:
            os.environ["INCIN_JOB_ID"] = a.job
        os.environ["INCIN_IFACE"] = a.iface
        if a.summary_json:
            os.environ["INCIN_TORCH_SUMMARY_JSON"] = a.summary_json
        import incin  # noqa: F401  registers the backend
    torch.set_num_threads(1)
    t0 = time.time()
    dist.init_process_group(a.backend, init_method=f"tcp://{a.master}", rank=a.rank, world_size=a.world)
    t_init = time.time() - t0
    bad = [] if a.no_checks else check_collectives(dist, torch, a.rank, a.world, a.backend)

    # The model and data: seeded, identical on every run; data differs per rank.
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(64, a.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(a.hidden, a.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(a.hidden, 10))
    # Rank 0's initial parameters reach every rank through DDP's broadcast:
    # perturb the others so that broadcast is checked too.
    if a.rank != 0:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.5)
    ddp = DDP(model)
    gen = torch.Generator().manual_seed(99 + a.rank)
    teacher = torch.Generator().manual_seed(7)
    w_true = torch.randn(64, 10, generator=teacher)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses, step_times = [], []
    for step in range(a.steps):
        x = torch.randn(a.batch, 64, generator=gen)
        y = (x @ w_true).argmax(dim=1)
        s0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        step_times.append(time.perf_counter() - s0)
        losses.append(loss.item())
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    step_times.sort()
    out = {
        "backend": a.backend, "rank": a.rank, "world": a.world, "steps": a.steps,
        "params": sum(p.numel() for p in model.parameters()), "param_sha256": h.hexdigest(),
        "losses": losses, "wrong": bad, "init_seconds": t_init,
        "step_ms_median": 1000 * step_times[len(step_times) // 2],
        "step_ms_mean": 1000 * sum(step_times) / len(step_times),
    }
    if a.backend == "incin":
        import incin
        out["summary"] = json.loads(incin.summary_json())
    with open(a.out, "w") as f:
        json.dump(out, f)
    for b in bad:
        print(f"rank {a.rank}: WRONG {b}", file=sys.stderr)
    print(f"rank {a.rank} {a.backend}: {a.steps} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"step {out['step_ms_median']:.2f} ms median, params {h.hexdigest()[:16]}, "
          f"checks: {len(bad)} wrong")
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
