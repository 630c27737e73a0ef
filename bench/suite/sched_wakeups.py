#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where a CPU-shared lab loses time to the scheduler: reads `perf sched record`
data and reports, for the tasks named by --comm (default inc-perf),

- every wake-up classed by where it lands (the target CPU idle or busy, the
  other CPUs idle or busy, the waker on the target CPU or not) with the mean
  and median time from sched_waking to running;
- per CPU, the idle time and how much of it passed while a task of --comm was
  runnable (woken or preempted) but waiting for a CPU.

A wake-up that targets an idle CPU from another CPU costs an inter-processor
interrupt to a halted vCPU; on a VM without guest halt polling that exit is the
hypervisor's, and its latency is what this shows. Usage:

  perf sched record -a -o sched.data -- sleep 1     # while the benchmark runs
  python3 bench/suite/sched_wakeups.py sched.data [--comm inc-perf] [--json]

perf drops some switch-in events from idle under load; an idle period then ends at
the next event on that CPU (so idle may be over-counted, never under).
"""
import argparse
import collections
import json
import re
import statistics
import subprocess
import sys

LINE = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)")
FIELD = re.compile(r"(\w+)=(\S+)")


def read_events(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "cpu,time,event,trace"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit("perf script failed: " + out.stderr.strip())
    events = []
    for line in out.stdout.splitlines():
        m = LINE.match(line)
        if m:
            events.append((float(m.group(2)), int(m.group(1)), m.group(3), dict(FIELD.findall(m.group(4)))))
    events.sort(key=lambda e: e[0])
    return events


def merged_overlap(intervals, a, b):
    total, end = 0.0, a
    for s, e in sorted((max(s, a), min(e, b)) for s, e in intervals if s < b and e > a):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def analyse(events, comm):
    cpus = sorted({e[1] for e in events})
    current = {c: None for c in cpus}
    waking = {}  # pid -> (time, class)
    classes = collections.Counter()
    latency = collections.defaultdict(list)
    runnable = {}  # pid -> since (woken or preempted, not running)
    waits = []
    idle_since, idle = {}, collections.defaultdict(list)
    for t, cpu, ev, f in events:
        switch_to_idle = ev == "sched_switch" and f.get("next_pid") == "0"
        if cpu in idle_since and ev in ("sched_switch", "sched_stat_runtime") and not switch_to_idle:
            idle[cpu].append((idle_since.pop(cpu), t))
        if ev == "sched_switch":
            current[cpu] = f["next_pid"]
            if f["prev_comm"].startswith(comm) and f["prev_state"].startswith("R"):
                runnable[f["prev_pid"]] = t
            if f["next_pid"] in runnable:
                waits.append((runnable.pop(f["next_pid"]), t))
            if f["next_pid"] in waking:
                t0, cls = waking.pop(f["next_pid"])
                latency[cls].append(t - t0)
            if switch_to_idle:
                idle_since[cpu] = t
        elif ev == "sched_stat_runtime" and current[cpu] == "0":
            current[cpu] = f.get("pid")
        elif ev == "sched_waking" and f.get("comm", "").startswith(comm):
            target = int(f["target_cpu"])
            others_idle = [current.get(c) == "0" for c in cpus if c != target]
            cls = "target %s, %s, waker %s" % (
                "idle" if current.get(target) == "0" else "busy",
                "another CPU idle" if any(others_idle) else "no other CPU idle",
                "on the target" if cpu == target else "on another CPU")
            classes[cls] += 1
            waking[f["pid"]] = (t, cls)
            runnable[f["pid"]] = t
    span = events[-1][0] - events[0][0] if events else 0.0
    report = {"seconds": round(span, 3), "wakeups": [], "cpus": []}
    for cls, n in classes.most_common():
        lat = latency[cls]
        report["wakeups"].append({
            "class": cls, "count": n,
            "mean_us": round(1e6 * statistics.fmean(lat), 1) if lat else None,
            "median_us": round(1e6 * statistics.median(lat), 1) if lat else None})
    for cpu in cpus:
        ivs = idle[cpu]
        idle_s = sum(b - a for a, b in ivs)
        waiting_s = sum(merged_overlap(waits, a, b) for a, b in ivs)
        report["cpus"].append({"cpu": cpu, "idle_ms": round(1e3 * idle_s, 1),
                               "idle_with_a_task_waiting_ms": round(1e3 * waiting_s, 1)})
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="perf sched record output")
    ap.add_argument("--comm", default="inc-perf", help="task name prefix to follow (default inc-perf)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()
    events = read_events(args.data)
    if not events:
        sys.exit("no sched events in " + args.data)
    report = analyse(events, args.comm)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print("%.3f s of sched events, tasks %s*" % (report["seconds"], args.comm))
    print("%7s %9s %9s  %s" % ("wakeups", "mean us", "median us", "where they landed"))
    for w in report["wakeups"]:
        print("%7d %9s %9s  %s" % (w["count"], w["mean_us"], w["median_us"], w["class"]))
    for c in report["cpus"]:
        print("cpu%d: idle %.1f ms, of which %.1f ms with a %s task runnable but waiting" %
              (c["cpu"], c["idle_ms"], c["idle_with_a_task_waiting_ms"], args.comm))


if __name__ == "__main__":
    main()
