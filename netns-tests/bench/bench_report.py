#!/usr/bin/env python3
"""Report of scripts/bench.sh: medians over repetitions per (topology,
system, size) from raw.csv, one table per topology (printed and written to
summary.md), bench.csv with every column of the tables, and busbw-<topology>.png
(gnuplot, log-log) per topology.

busbw: ring baselines algbw * 2(n-1)/n; INC and the ceiling algbw (each
worker sends and receives the buffer once). INC/MPI and INC/Gloo are busbw
ratios; INC/ceiling is INC time / ceiling time.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys

SYSTEMS = [("inc", "INC"), ("mpi", "Open MPI"), ("gloo", "Gloo"), ("ceiling", "ceiling")]
COLUMNS = ["topology", "size_bytes", "inc_busbw_GBps", "mpi_busbw_GBps", "gloo_busbw_GBps",
           "ceiling_busbw_GBps", "inc_over_mpi_busbw", "inc_over_gloo_busbw", "inc_over_ceiling_time",
           "inc_time_us", "mpi_time_us", "gloo_time_us", "ceiling_time_us", "reps"]


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

            def ratio(a, c):
                return a / c if a is not None and c else None

            rows.append({
                "topology": topo, "size_bytes": size,
                "inc_busbw_GBps": b["inc"], "mpi_busbw_GBps": b["mpi"], "gloo_busbw_GBps": b["gloo"],
                "ceiling_busbw_GBps": b["ceiling"],
                "inc_over_mpi_busbw": ratio(b["inc"], b["mpi"]), "inc_over_gloo_busbw": ratio(b["inc"], b["gloo"]),
                "inc_over_ceiling_time": ratio(t["inc"], t["ceiling"]),
                "inc_time_us": t["inc"], "mpi_time_us": t["mpi"], "gloo_time_us": t["gloo"],
                "ceiling_time_us": t["ceiling"], "reps": reps,
            })
        out[topo] = rows
    return out


def table(topo, rows):
    lines = [f"### {topo}-level (4 workers; medians over repetitions)", "",
             "busbw in GB/s: ring baselines algbw x 2(n-1)/n, INC and ceiling algbw (in-network: each worker "
             "sends and receives the buffer once). INC/MPI, INC/Gloo: busbw ratios (>1: INC faster). "
             "INC/ceiling: INC time / ceiling time (1 = forwarding speed).", "",
             "| size | INC busbw | Open MPI busbw | Gloo busbw | ceiling busbw | INC/Open MPI | INC/Gloo | INC/ceiling | "
             "INC time (us) | Open MPI time (us) | Gloo time (us) | ceiling time (us) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| " + " | ".join([
            human(r["size_bytes"]), fmt(r["inc_busbw_GBps"], ".3g"), fmt(r["mpi_busbw_GBps"], ".3g"),
            fmt(r["gloo_busbw_GBps"], ".3g"), fmt(r["ceiling_busbw_GBps"], ".3g"),
            fmt(r["inc_over_mpi_busbw"], ".2f"), fmt(r["inc_over_gloo_busbw"], ".2f"),
            fmt(r["inc_over_ceiling_time"], ".2f"), fmt(r["inc_time_us"], ".1f"), fmt(r["mpi_time_us"], ".1f"),
            fmt(r["gloo_time_us"], ".1f"), fmt(r["ceiling_time_us"], ".1f")]) + " |")
    small = rows[0] if rows else None
    if small:
        lines += ["", f"{human(small['size_bytes'])} latency (us): INC {fmt(small['inc_time_us'], '.1f')}, "
                  f"Open MPI {fmt(small['mpi_time_us'], '.1f')}, Gloo {fmt(small['gloo_time_us'], '.1f')}, "
                  f"ceiling {fmt(small['ceiling_time_us'], '.1f')}"]
    big = rows[-1] if rows else None
    if big and small:
        def verdict(v, ok):
            return "n/a" if v is None else ("met" if ok(v) else "missed")
        lat = (small["inc_time_us"] / small["mpi_time_us"]
               if small["inc_time_us"] is not None and small["mpi_time_us"] else None)
        lines += ["", f"Targets ({human(big['size_bytes'])} and {human(small['size_bytes'])}):",
                  f"- busbw INC >= 2x Open MPI: {fmt(big['inc_over_mpi_busbw'], '.2f')}x, "
                  f"{verdict(big['inc_over_mpi_busbw'], lambda v: v >= 2)}",
                  f"- busbw INC >= 2x Gloo: {fmt(big['inc_over_gloo_busbw'], '.2f')}x, "
                  f"{verdict(big['inc_over_gloo_busbw'], lambda v: v >= 2)}",
                  f"- latency INC <= 0.5x Open MPI: {fmt(lat, '.2f')}x, {verdict(lat, lambda v: v <= 0.5)}",
                  f"- time INC <= 1.3x ceiling: {fmt(big['inc_over_ceiling_time'], '.2f')}x, "
                  f"{verdict(big['inc_over_ceiling_time'], lambda v: v <= 1.3)}"]
    return "\n".join(lines) + "\n"


def plot(topo, rows, out_dir):
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
set title 'allreduce busbw, {topo}-level lab, 4 workers (medians)'
set logscale xy
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set grid
set key right bottom
set datafile missing '?'
set format x '%.0s%c'
set format y '%g'
plot '{data}' using 1:2 with linespoints lw 2 title 'INC (busbw = algbw)', \\
     '' using 1:3 with linespoints lw 2 title 'Open MPI (ring factor)', \\
     '' using 1:4 with linespoints lw 2 title 'Gloo ring (ring factor)', \\
     '' using 1:5 with linespoints lw 2 dt 2 title 'forwarding ceiling (busbw = algbw)'
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
    ap.add_argument("--machine", help="machine record to put at the top of summary.md")
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
        text += table(topo, rows) + "\n"
        plot(topo, rows, a.out)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
