#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Report of scripts/bench.sh: medians over repetitions per (topology,
system, size) from raw.csv, one table per topology (printed and written to
summary.md), the targets with met/missed, the load during the runs (from
runs.csv), bench.csv with every column of the tables, and
busbw-<topology>.png (gnuplot, log-log) per topology.

Definitions: time = median over the repetitions of the mean time per
allreduce on rank 0. Speedup vs Open MPI = Open MPI time / INC time, vs Gloo
likewise, vs the faster ring = min(ring times) / INC time (> 1: INC faster).
INC/ceiling = INC time / ceiling time (1 = forwarding speed). busbw = algbw
x 2(n-1)/n for every system (nccl-tests' allreduce definition; algbw =
size / time), so busbw ratios equal the speedups.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys

SYSTEMS = [("inc", "INC"), ("mpi", "Open MPI"), ("gloo", "Gloo"), ("ceiling", "ceiling")]
RINGS = ("mpi", "gloo")
COLUMNS = ["topology", "workers", "size_bytes", "inc_time_us", "mpi_time_us", "gloo_time_us", "ceiling_time_us",
           "speedup_vs_mpi", "speedup_vs_gloo", "speedup_vs_faster_ring", "inc_over_ceiling_time",
           "inc_busbw_GBps", "mpi_busbw_GBps", "gloo_busbw_GBps", "ceiling_busbw_GBps", "reps",
           "inc_min_us", "inc_max_us", "mpi_min_us", "mpi_max_us", "gloo_min_us", "gloo_max_us",
           "ceiling_min_us", "ceiling_max_us"]
TOPO_ORDER = ["single", "two"]
MIB = 1 << 20
# The targets, for 4 workers and float32 sum.
TARGET_WORKERS = 4
SPEEDUP_AT_64M = 1.5
CEILING_FACTOR = 1.5
CEILING_FROM = 2 * MIB
LATENCY_FACTOR = 0.5


def human(n):
    for unit, div in (("MiB", MIB), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


def busbw(size, t, n):
    """nccl-tests' allreduce busbw in GB/s from the size (B) and time (us)."""
    return size / t / 1e3 * 2 * (n - 1) / n if t else None


def load(raw):
    """(topo, system, size) -> times (us); topo -> worker count."""
    runs, workers = {}, {}
    with open(raw) as f:
        for row in csv.DictReader(f):
            key = (row["topology"], row["system"], int(row["size_bytes"]))
            runs.setdefault(key, []).append(float(row["time_us"]))
            # raw.csv written before the workers column had 4.
            workers[row["topology"]] = int(row.get("workers") or 4)
    return runs, workers


def summarize(runs, workers):
    out = {}
    for topo in sorted({k[0] for k in runs}, key=lambda t: TOPO_ORDER.index(t) if t in TOPO_ORDER else 9):
        n = workers[topo]
        rows = []
        for size in sorted({k[2] for k in runs if k[0] == topo}):
            t, reps, spread = {}, 0, {}
            for s, _ in SYSTEMS:
                vals = runs.get((topo, s, size))
                t[s] = statistics.median(vals) if vals else None
                spread[s] = (min(vals), max(vals)) if vals else None
                reps = max(reps, len(vals or []))
            rings = [t[s] for s in RINGS if t[s] is not None]
            row = {"topology": topo, "workers": n, "size_bytes": size, "reps": reps,
                   "speedup_vs_mpi": ratio(t["mpi"], t["inc"]), "speedup_vs_gloo": ratio(t["gloo"], t["inc"]),
                   "speedup_vs_faster_ring": ratio(min(rings), t["inc"]) if rings else None,
                   "inc_over_ceiling_time": ratio(t["inc"], t["ceiling"])}
            for s, _ in SYSTEMS:
                row[f"{s}_time_us"] = t[s]
                row[f"{s}_busbw_GBps"] = busbw(size, t[s], n) if t[s] is not None else None
                row[f"{s}_min_us"] = spread[s][0] if spread[s] else None
                row[f"{s}_max_us"] = spread[s][1] if spread[s] else None
            rows.append(row)
        out[topo] = rows
    return out


PER_HOST = 1  # ranks per worker (--ranks-per-host): the "workers" column counts ranks


def worker_note(topo, n):
    if PER_HOST > 1:
        hosts = n // PER_HOST
        where = "w0, w1 on leaf0, w2, w3 on leaf1" if topo == "two" and hosts > 2 else "on leaf0"
        return (f"{n} ranks, {PER_HOST} on each of {hosts} workers ({', '.join(f'w{i}' for i in range(hosts))}; "
                f"{where})")
    names = ", ".join(f"w{i}" for i in range(n))
    if topo == "two" and n <= 2:
        return (f"{n} workers ({names}), all on leaf0: leaf1 and the spines carry none of this run's traffic "
                "(INC's tree is leaf0 alone, the rings are forwarded by leaf0, the ceiling reflects at leaf0), "
                "so this is the single-level path")
    if topo == "two":
        return f"{n} workers ({names}): w0, w1 on leaf0, w2, w3 on leaf1"
    return f"{n} workers ({names}) on leaf0"


def table(topo, rows):
    n = rows[0]["workers"]
    reps = max(r["reps"] for r in rows)
    lines = [f"### {topo}-level ({worker_note(topo, n)}; medians over {reps} repetition{'s' if reps > 1 else ''})",
             "",
             "| size | INC time (us) | Open MPI time (us) | Gloo time (us) | ceiling time (us) | speedup vs Open MPI | "
             "speedup vs Gloo | speedup vs faster ring | INC/ceiling time | INC busbw | Open MPI busbw | Gloo busbw | "
             "ceiling busbw |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| " + " | ".join(
            [human(r["size_bytes"])] + [fmt(r[f"{s}_time_us"], ".1f") for s, _ in SYSTEMS] +
            [fmt(r[k], ".2f") for k in ("speedup_vs_mpi", "speedup_vs_gloo", "speedup_vs_faster_ring",
                                         "inc_over_ceiling_time")] +
            [fmt(r[f"{s}_busbw_GBps"], ".3g") for s, _ in SYSTEMS]) + " |")
    small = rows[0]
    lines += ["", f"{human(small['size_bytes'])} latency (us): " +
              ", ".join(f"{name} {fmt(small[f'{s}_time_us'], '.1f')}" for s, name in SYSTEMS)]
    return "\n".join(lines) + "\n"


def faster_ring(r):
    rings = [(r[f"{s}_time_us"], name) for s, name in SYSTEMS if s in RINGS and r[f"{s}_time_us"] is not None]
    return min(rings) if rings else (None, None)


def targets(summary):
    """The four targets per topology: (lines, met, checked, not applicable)."""
    checks = []  # (label, [(topo, verdict text, ok or None)])
    sizes = sorted({r["size_bytes"] for rows in summary.values() for r in rows})

    a = []
    for topo, rows in summary.items():
        got = [(r["size_bytes"], r["speedup_vs_faster_ring"]) for r in rows
               if r["speedup_vs_faster_ring"] is not None]
        if not got:
            a.append((topo, "n/a (no INC or ring time)", None))
            continue
        low = [(s, v) for s, v in got if v < 1.0]
        span = f"{min(v for _, v in got):.2f}x-{max(v for _, v in got):.2f}x over {len(got)} sizes"
        if low:
            a.append((topo, "missed: below 1.0 at " + ", ".join(f"{human(s)} ({v:.2f}x)" for s, v in low) +
                      f" ({span})", False))
        else:
            a.append((topo, f"met ({span})", True))
    checks.append(("(a) INC time <= the faster ring's time at every size (speedup vs the faster ring >= 1.0)", a))

    if 64 * MIB in sizes:
        b = []
        for topo, rows in summary.items():
            r = next((x for x in rows if x["size_bytes"] == 64 * MIB), None)
            v = r and r["speedup_vs_faster_ring"]
            if not v:
                b.append((topo, "n/a (no INC or ring time at 64 MiB)", None))
                continue
            ring_t, ring = faster_ring(r)
            ok = v >= SPEEDUP_AT_64M
            b.append((topo, f"{v:.2f}x (INC {r['inc_time_us'] / 1e3:.1f} ms, {ring} {ring_t / 1e3:.1f} ms), "
                      f"{'met' if ok else 'missed'}", ok))
        checks.append((f"(b) at 64 MiB speedup vs the faster ring >= {SPEEDUP_AT_64M}", b))

    if any(s >= CEILING_FROM for s in sizes):
        c = []
        for topo, rows in summary.items():
            got = [(r["size_bytes"], r["inc_over_ceiling_time"]) for r in rows
                   if r["size_bytes"] >= CEILING_FROM and r["inc_over_ceiling_time"] is not None]
            if not got:
                c.append((topo, "n/a (no INC or ceiling time from 2 MiB)", None))
                continue
            ok = all(v <= CEILING_FACTOR for _, v in got)
            c.append((topo, ("met" if ok else "missed") + ": INC/ceiling " +
                      ", ".join(f"{human(s)} {v:.2f}x" for s, v in got), ok))
        checks.append((f"(c) INC time <= {CEILING_FACTOR}x ceiling time at every size >= 2 MiB", c))

    if 8 in sizes:
        d = []
        for topo, rows in summary.items():
            r = next((x for x in rows if x["size_bytes"] == 8), None)
            v = r and ratio(r["inc_time_us"], r["mpi_time_us"])
            if not v:
                d.append((topo, "n/a (no INC or Open MPI time at 8 B)", None))
                continue
            ok = v <= LATENCY_FACTOR
            d.append((topo, f"{r['inc_time_us']:.1f} vs {r['mpi_time_us']:.1f} us = {v:.2f}x, "
                      f"{'met' if ok else 'missed'}", ok))
        checks.append((f"(d) 8-byte latency: INC <= {LATENCY_FACTOR}x Open MPI", d))

    skipped = []
    if 64 * MIB not in sizes:
        skipped.append("(b) needs 64 MiB")
    if not any(s >= CEILING_FROM for s in sizes):
        skipped.append("(c) needs sizes >= 2 MiB")
    if 8 not in sizes:
        skipped.append("(d) needs 8 B")
    return checks, skipped


def targets_text(summary):
    workers = {rows[0]["workers"] for rows in summary.values()}
    checks, skipped = targets(summary)
    head = "### Targets (4 workers, float32 sum, every topology)"
    lines = [head, ""]
    if workers != {TARGET_WORKERS}:
        lines += [f"The targets are set for {TARGET_WORKERS} workers; this run has "
                  f"{', '.join(str(w) for w in sorted(workers))}, so the verdicts below are indicative only.", ""]
    met = total = 0
    for label, per_topo in checks:
        lines.append(f"- {label}:")
        for topo, text, ok in per_topo:
            lines.append(f"  - {topo}-level: {text}")
            if ok is not None:
                total += 1
                met += ok
    if skipped:
        lines.append(f"- not checked in this run (no size it needs): {'; '.join(skipped)}")
    lines += ["", f"{met} of {total} checks met."]
    return "\n".join(lines) + "\n"


def runs_text(path, high):
    """Load, failures and retransmissions of the runs in runs.csv."""
    rows = list(csv.DictReader(open(path)))
    if not rows:
        return ""

    def num(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    lines = ["### Runs and load", ""]
    failed = [r["run"] for r in rows if r["exit"] != "0"]
    lines.append(f"{len(rows)} runs, {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "") + ".")
    before = [v for v in (num(r.get("load1_before")) for r in rows) if v is not None]
    after = [v for v in (num(r.get("load1_after")) for r in rows) if v is not None]
    span = []
    if before:
        span.append(f"before {min(before):.2f}-{max(before):.2f}")
    if after:
        span.append(f"after {min(after):.2f}-{max(after):.2f}")
    if span:
        lines.append(f"Load average (1 min) around each run: {', '.join(span)}.")
    hot = []
    for r in rows:
        b, a = num(r.get("load1_before")), num(r.get("load1_after"))
        if (b is not None and b > high) or (a is not None and a > high):
            hot.append(f"{r['run']} ({fmt(b, '.2f')} -> {fmt(a, '.2f')})")
    if hot:
        which = ("That is every run (runs.csv has each one's load)" if len(hot) == len(rows) else
                 "Runs (load1 before -> after): " + ", ".join(hot))
        lines += ["", f"**Load was high (load1 > {high:g} before or after) during {len(hot)} of {len(rows)} runs: "
                  f"numbers may be noisy.** {which}.",
                  "load1 counts the suite's own processes too: a long run raises its own \"after\" and the next "
                  "run's \"before\"."]
    elif before or after:
        lines.append(f"load1 stayed <= {high:g} before and after every run.")
    retx = {}
    for r in rows:
        v = num(r.get("retransmissions"))
        if v is not None:
            retx.setdefault((r["topology"], r["system"]), []).append(int(v))
    if retx:
        lines.append("libinc retransmissions per run (rank 0, whole size range): " + "; ".join(
            f"{t} {s} {min(v)}-{max(v)}" for (t, s), v in sorted(retx.items())) + ".")
    return "\n".join(lines) + "\n"


SPREAD_LIMIT = 0.25  # (max - min) / median of one system's repetitions


def spread_text(summary, runs_path):
    """Every (topology, size, system) whose repetitions differ by more than
    SPREAD_LIMIT of their median, with the load and the CPU idle and steal
    shares of that system's runs on that topology (runs.csv)."""
    runs = list(csv.DictReader(open(runs_path))) if runs_path and os.path.exists(runs_path) else []

    def shares(topo, s):
        rs = [r for r in runs if r["topology"] == topo and r["system"] == s]
        def col(k):
            v = [float(r[k]) for r in rs if r.get(k) not in (None, "")]
            return f"{min(v):g}-{max(v):g}" if v else "-"
        return f"load1 {col('load1_before')}, idle {col('idle_pct')} %, steal {col('steal_pct')} %"

    flagged = []
    for topo, rows in summary.items():
        for r in rows:
            for s, name in SYSTEMS:
                med, lo, hi = r[f"{s}_time_us"], r[f"{s}_min_us"], r[f"{s}_max_us"]
                if med and lo is not None and (hi - lo) / med > SPREAD_LIMIT:
                    flagged.append(f"- {topo}-level {human(r['size_bytes'])} {name}: median {med:.1f} us, "
                                   f"min-max {lo:.1f}-{hi:.1f} us ({100 * (hi - lo) / med:.0f} %); its runs: "
                                   f"{shares(topo, s)}")
    lines = ["### Spread of the repetitions", ""]
    if flagged:
        lines += [f"**{len(flagged)} configurations whose repetitions differ by more than "
                  f"{100 * SPREAD_LIMIT:.0f} % of their median** (their ratios are less certain):", ""] + flagged
    else:
        lines.append(f"Every system's repetitions stayed within {100 * SPREAD_LIMIT:.0f} % of their median at "
                     "every size (min-max per configuration in bench.csv).")
    return "\n".join(lines) + "\n"


def plot(topo, rows, out_dir):
    n = rows[0]["workers"]
    data = os.path.join(out_dir, f"busbw-{topo}.dat")
    with open(data, "w") as f:
        f.write("# size inc mpi gloo ceiling (busbw GB/s = algbw x 2(n-1)/n, ? = missing)\n")
        for r in rows:
            vals = [r[f"{s}_busbw_GBps"] for s, _ in SYSTEMS]
            f.write(" ".join([str(r["size_bytes"])] + ["?" if v is None or v <= 0 else f"{v:.6g}" for v in vals]) + "\n")
    png = os.path.join(out_dir, f"busbw-{topo}.png")
    script = f"""
set terminal pngcairo size 900,600 noenhanced
set output '{png}'
set title 'allreduce busbw, {topo}-level lab, {n} {"ranks" if PER_HOST > 1 else "workers"} (medians)'
set logscale xy
set xlabel 'message size (bytes)'
set ylabel 'busbw = algbw x 2(n-1)/n (GB/s)'
set grid
set key right bottom
set datafile missing '?'
set format x '%.0s%c'
set format y '%g'
plot '{data}' using 1:2 with linespoints lw 2 title 'INC', \\
     '' using 1:3 with linespoints lw 2 title 'Open MPI', \\
     '' using 1:4 with linespoints lw 2 title 'Gloo ring', \\
     '' using 1:5 with linespoints lw 2 dt 2 title 'forwarding ceiling'
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"bench_report: gnuplot failed for {topo}: {e}", file=sys.stderr)
        return None
    return png


DEFINITIONS = (
    "Definitions: time = mean per allreduce on rank 0, median over the repetitions. "
    "Speedup vs Open MPI = Open MPI time / INC time, vs Gloo likewise, vs the faster ring = "
    "min(Open MPI time, Gloo time) / INC time (> 1: INC faster). INC/ceiling time = INC time / ceiling time "
    "(1 = forwarding speed). busbw (GB/s) = algbw x 2(n-1)/n for every system, INC included (nccl-tests' "
    "allreduce definition; algbw = size / time), so busbw ratios equal the speedups.\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--raw", required=True, help="raw.csv written by scripts/bench.sh")
    ap.add_argument("--runs", help="runs.csv written by scripts/bench.sh (load, failures, retransmissions)")
    ap.add_argument("--machine", help="machine record to put at the top of summary.md")
    ap.add_argument("--high-load", type=float, default=1.5,
                    help="flag runs whose 1-minute load average before or after exceeded this (default 1.5)")
    ap.add_argument("--out", required=True, help="directory for bench.csv, summary.md and the plots")
    ap.add_argument("--ranks-per-host", type=int, default=1, help="ranks per worker of the run (default 1)")
    a = ap.parse_args()
    global PER_HOST
    PER_HOST = a.ranks_per_host
    summary = summarize(*load(a.raw))
    if not summary:
        sys.exit("bench_report: no rows in " + a.raw)
    with open(os.path.join(a.out, "bench.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for rows in summary.values():
            for r in rows:
                w.writerow({k: ("" if r[k] is None else (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]))
                            for k in COLUMNS})
    text = ""
    if a.machine and os.path.exists(a.machine):
        text += "Machine and run:\n\n```\n" + open(a.machine).read() + "```\n\n"
    if a.runs and os.path.exists(a.runs):
        text += runs_text(a.runs, a.high_load) + "\n"
    text += DEFINITIONS + "\n"
    for topo, rows in summary.items():
        text += table(topo, rows) + "\n"
        plot(topo, rows, a.out)
    text += spread_text(summary, a.runs) + "\n"
    text += targets_text(summary)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
