#!/usr/bin/env python3
"""Report of scripts/bench.sh: medians over repetitions per (topology,
system, size) from raw.csv, one table per topology (printed and written to
summary.md), the targets checked against them, the runs whose load average
was high (runs.csv), bench.csv with every column of the tables, and
busbw-<topology>.png (gnuplot, log-log) per topology.

Definitions: time = mean per iteration on rank 0. busbw = algbw * 2(n-1)/n
for every system (nccl-tests' allreduce definition), so busbw ratios equal
time ratios. speedup = ring time / INC time (> 1: INC faster), against Open
MPI, Gloo and the faster of the two ("best ring"). INC/ceiling = INC time /
ceiling time (1 = forwarding speed).
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys

SYSTEMS = [("inc", "INC"), ("mpi", "Open MPI"), ("gloo", "Gloo"), ("ceiling", "ceiling")]
COLUMNS = ["topology", "size_bytes", "inc_time_us", "mpi_time_us", "gloo_time_us", "ceiling_time_us",
           "speedup_vs_mpi", "speedup_vs_gloo", "speedup_vs_best_ring", "inc_over_ceiling_time",
           "inc_busbw_GBps", "mpi_busbw_GBps", "gloo_busbw_GBps", "ceiling_busbw_GBps", "reps"]
HIGH_LOAD = 1.5  # 1-minute load average on this 2-vCPU machine above which a run may be noisy
MIB = 1 << 20


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def load(raw):
    runs = {}  # (topo, system, size) -> list of (time, busbw)
    with open(raw) as f:
        for row in csv.DictReader(f):
            key = (row["topology"], row["system"], int(row["size_bytes"]))
            runs.setdefault(key, []).append((float(row["time_us"]), float(row["busbw_GBps"])))
    return runs


def ratio(a, c):
    return a / c if a is not None and c else None


def summarize(runs):
    out = {}
    for topo in sorted({k[0] for k in runs}, key=lambda t: ["single", "two"].index(t) if t in ("single", "two") else 9):
        sizes = sorted({k[2] for k in runs if k[0] == topo})
        rows = []
        for size in sizes:
            med = {}
            reps = 0
            for sys_id, _ in SYSTEMS:
                vals = runs.get((topo, sys_id, size))
                if vals:
                    med[sys_id] = (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals))
                    reps = max(reps, len(vals))
            t = {s: med[s][0] if s in med else None for s, _ in SYSTEMS}
            b = {s: med[s][1] if s in med else None for s, _ in SYSTEMS}
            rings = [v for v in (t["mpi"], t["gloo"]) if v is not None]
            rows.append({
                "topology": topo, "size_bytes": size,
                "inc_time_us": t["inc"], "mpi_time_us": t["mpi"], "gloo_time_us": t["gloo"],
                "ceiling_time_us": t["ceiling"],
                "speedup_vs_mpi": ratio(t["mpi"], t["inc"]), "speedup_vs_gloo": ratio(t["gloo"], t["inc"]),
                "speedup_vs_best_ring": ratio(min(rings), t["inc"]) if rings else None,
                "inc_over_ceiling_time": ratio(t["inc"], t["ceiling"]),
                "inc_busbw_GBps": b["inc"], "mpi_busbw_GBps": b["mpi"], "gloo_busbw_GBps": b["gloo"],
                "ceiling_busbw_GBps": b["ceiling"], "reps": reps,
            })
        out[topo] = rows
    return out


def table(topo, rows, workers):
    lines = [f"### {topo}-level ({workers} workers; medians over repetitions)", "",
             "time = mean per iteration on rank 0; speedup = ring time / INC time (> 1: INC faster; best ring = "
             "the faster of Open MPI and Gloo); INC/ceiling = INC time / ceiling time (1 = forwarding speed); "
             "busbw (GB/s) = algbw x 2(n-1)/n for every system (nccl-tests).", "",
             "| size | INC (us) | Open MPI (us) | Gloo (us) | ceiling (us) | speedup vs Open MPI | speedup vs Gloo | "
             "speedup vs best ring | INC/ceiling | INC busbw | Open MPI busbw | Gloo busbw | ceiling busbw |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| " + " | ".join([
            human(r["size_bytes"]), fmt(r["inc_time_us"], ".1f"), fmt(r["mpi_time_us"], ".1f"),
            fmt(r["gloo_time_us"], ".1f"), fmt(r["ceiling_time_us"], ".1f"), fmt(r["speedup_vs_mpi"], ".2f"),
            fmt(r["speedup_vs_gloo"], ".2f"), fmt(r["speedup_vs_best_ring"], ".2f"),
            fmt(r["inc_over_ceiling_time"], ".2f"), fmt(r["inc_busbw_GBps"], ".3g"), fmt(r["mpi_busbw_GBps"], ".3g"),
            fmt(r["gloo_busbw_GBps"], ".3g"), fmt(r["ceiling_busbw_GBps"], ".3g")]) + " |")
    if topo == "two" and workers == 2:
        lines += ["", "With 2 workers both sit on leaf0: the tree is single-level even in the two-level lab."]
    return "\n".join(lines) + "\n"


def verdict(ok):
    return "met" if ok else "missed"


def targets(summary):
    """The suite's targets over every topology; returns markdown lines."""
    lines = ["### Targets", ""]
    every, at64, ceil, lat = [], [], [], []
    for topo, rows in summary.items():
        for r in rows:
            s = r["speedup_vs_best_ring"]
            if s is not None:
                every.append((topo, r["size_bytes"], s))
            c = r["inc_over_ceiling_time"]
            if c is not None and r["size_bytes"] >= 2 * MIB:
                ceil.append((topo, r["size_bytes"], c))
        big = [r for r in rows if r["size_bytes"] == 64 * MIB]
        if big and big[0]["speedup_vs_best_ring"] is not None:
            at64.append((topo, big[0]["speedup_vs_best_ring"]))
        small = [r for r in rows if r["size_bytes"] == 8]
        if small:
            l8 = ratio(small[0]["inc_time_us"], small[0]["mpi_time_us"])
            if l8 is not None:
                lat.append((topo, l8))
    if every:
        worst = min(every, key=lambda x: x[2])
        slow = [f"{t} {human(n)} {s:.2f}" for t, n, s in every if s < 1.0]
        lines.append(f"- INC time <= the faster ring's at every size (speedup >= 1.0): "
                     f"{verdict(not slow)}; lowest {worst[2]:.2f} ({worst[0]} {human(worst[1])})"
                     + (f"; below 1.0: {', '.join(slow)}" if slow else ""))
    if at64:
        lines.append("- 64 MiB speedup vs the faster ring >= 1.5: " + verdict(all(s >= 1.5 for _, s in at64)) +
                     "; " + ", ".join(f"{t} {s:.2f}" for t, s in at64))
    if ceil:
        over = [f"{t} {human(n)} {c:.2f}" for t, n, c in ceil if c > 1.3]
        lines.append("- INC time <= 1.3x ceiling at every size >= 2 MiB: " + verdict(not over) + "; " +
                     ", ".join(f"{t} {human(n)} {c:.2f}" for t, n, c in ceil))
    if lat:
        lines.append("- 8-byte latency <= 0.5x Open MPI's: " + verdict(all(v <= 0.5 for _, v in lat)) + "; " +
                     ", ".join(f"{t} {v:.2f}x" for t, v in lat))
    if len(lines) == 2:
        lines.append("- (no size of this run is one the targets name)")
    return lines


def load_flags(runs_csv):
    """Runs whose load average was high before or after them."""
    if not runs_csv or not os.path.exists(runs_csv):
        return []
    high, total = [], 0
    with open(runs_csv) as f:
        for row in csv.DictReader(f):
            total += 1
            loads = [float(row[k]) for k in ("load1_before", "load1_after") if row.get(k)]
            if loads and max(loads) > HIGH_LOAD:
                high.append(f"{row['run']} ({'/'.join(f'{v:.2f}' for v in loads)})")
    if not high:
        return ["", f"Load average (1 min) stayed at or below {HIGH_LOAD} before and after all {total} runs."]
    return ["", f"**Load was high (1-min load average above {HIGH_LOAD} before or after the run) during "
            f"{len(high)} of {total} runs: their numbers may be noisy.** " + ", ".join(high)]


def plot(topo, rows, out_dir, workers):
    data = os.path.join(out_dir, f"busbw-{topo}.dat")
    with open(data, "w") as f:
        f.write("# size inc mpi gloo ceiling (busbw GB/s, ? = missing)\n")
        for r in rows:
            vals = [r[f"{s}_busbw_GBps"] for s, _ in SYSTEMS]
            f.write(" ".join([str(r["size_bytes"])] + ["?" if v is None or v <= 0 else f"{v:.6g}" for v in vals]) + "\n")
    png = os.path.join(out_dir, f"busbw-{topo}.png")
    script = f"""
set terminal pngcairo size 900,600 noenhanced
set output '{png}'
set title 'allreduce busbw (algbw x 2(n-1)/n), {topo}-level lab, {workers} workers (medians)'
set logscale xy
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--raw", required=True, help="raw.csv written by scripts/bench.sh")
    ap.add_argument("--runs", help="runs.csv written by scripts/bench.sh (load averages)")
    ap.add_argument("--machine", help="machine record to put at the top of summary.md")
    ap.add_argument("--workers", type=int, default=4, help="workers in the runs")
    ap.add_argument("--out", required=True, help="directory for bench.csv, summary.md and the plots")
    a = ap.parse_args()
    summary = summarize(load(a.raw))
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
    for topo, rows in summary.items():
        text += table(topo, rows, a.workers) + "\n"
        plot(topo, rows, a.out, a.workers)
    text += "\n".join(targets(summary) + load_flags(a.runs)) + "\n"
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
