#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""lab.chaos helper (netns-tests/lab_chaos.sh).

  chaos_report.py job LOGDIR TAG START_MS END_MS RC RUN_OUT KILLED_TAGS_FILE
      classifies one finished job from its ranks' logs (LOGDIR/TAG-w*.log)
      and inclab run's output; prints one JSON line: tag, start/end (ms),
      rc, status (exact, wrong, failed, hang), wrong (elements, every rank
      and every row), kind and error (failed jobs).
  chaos_report.py summary DIR BOUND_MS
      reads DIR/jobs.jsonl, DIR/faults.tsv, DIR/samples.tsv and prints the
      summary; prints lines starting with "VIOLATION:" for each broken
      assertion (lab_chaos.sh fails on them).
"""
import glob
import json
import os
import re
import statistics
import sys


def first_error(texts):
    """The first line that says why a rank or the launcher failed."""
    pats = [
        re.compile(r"inc-perf rank \d+: .*"),
        re.compile(r".*first wrong element.*"),
        re.compile(r".*AM reports tree.*"),
        re.compile(r"inclab: w\d+ exited with \d+"),
        re.compile(r"inclab: .*"),
    ]
    for pat in pats:
        for text in texts:
            for line in text.splitlines():
                m = pat.search(line)
                if m:
                    return m.group(0).strip()
    return ""


def kind_of(error, killed):
    if killed:
        return "member_killed"
    if "configuring tree" in error:
        return "configure_failed"  # a switch went away while its tree was programmed
    if "has not registered" in error or "not alive" in error:
        return "switch_unregistered"  # a restarted switch not (yet) back at the AM
    if "JoinGroup" in error and "UNAVAILABLE" in error:
        return "join_unavailable"  # the AM died during JoinGroup
    if "JoinGroup" in error and "DEADLINE_EXCEEDED" in error:
        return "join_timeout"
    if "AM reports tree" in error:
        return "tree_failed"
    if "no job credential" in error:
        return "no_credential"
    if re.search(r"timeout|retransmi|retries", error, re.I):
        return "retransmission_timeout"
    if "exited with" in error:
        return "rank_exit"
    return "other"


def job(args):
    logdir, tag, start, end, rc, run_out, killed_file = args
    start, end, rc = int(start), int(end), int(rc)
    texts = []
    wrong = 0
    rows = 0
    json_exit = None
    for path in sorted(glob.glob(os.path.join(logdir, f"{tag}-w*.log"))):
        text = open(path, errors="replace").read()
        texts.append(text)
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{") and '"results"' in line:
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                rows += len(doc["results"])
                wrong += sum(r["wrong"] for r in doc["results"])
                json_exit = doc.get("exit_code")
        # A rank that saw a wrong element says so even if it never printed
        # the JSON line (only rank 0 prints it).
        if "first wrong element" in text and wrong == 0:
            wrong = -1  # wrong, count unknown
    run_text = open(run_out, errors="replace").read() if os.path.exists(run_out) else ""
    killed = False
    if os.path.exists(killed_file):
        killed = tag in open(killed_file).read().split()
    if rc == 124:  # lab_chaos.sh's time limit of the job ran out
        status = "hang"
    elif wrong != 0:
        status = "wrong"
    elif rc == 0 and json_exit == 0 and rows > 0:
        status = "exact"
    else:
        status = "failed"
    error = "" if status == "exact" else first_error(texts + [run_text])
    if status == "hang":
        error = error or "no exit within the job's time limit"
    rec = {
        "tag": tag,
        "start_ms": start,
        "end_ms": end,
        "rc": rc,
        "status": status,
        "wrong": wrong,
        "rows": rows,
        "kind": "" if status == "exact" else ("hang" if status == "hang" else kind_of(error, killed)),
        "error": error[:300],
    }
    print(json.dumps(rec))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(args):
    d, bound_ms = args[0], int(args[1])
    jobs = [json.loads(l) for l in open(os.path.join(d, "jobs.jsonl")) if l.strip()]
    faults = []
    fpath = os.path.join(d, "faults.tsv")
    if os.path.exists(fpath):
        for line in open(fpath):
            f = line.split("\t")
            if len(f) >= 3:
                faults.append({"t": int(f[0]), "kind": f[1], "what": f[2].strip()})
    viol = []
    by = {}
    for j in jobs:
        by.setdefault(j["status"], []).append(j)
    exact = len(by.get("exact", []))
    print(f"jobs {len(jobs)}: exact {exact}, failed {len(by.get('failed', []))}, "
          f"wrong {len(by.get('wrong', []))}, hung {len(by.get('hang', []))}")
    fk = {}
    for j in by.get("failed", []) + by.get("hang", []):
        fk.setdefault(j["kind"], []).append(j)
    for k, js in sorted(fk.items()):
        print(f"  failed {k}: {len(js)}")
    wrong_elems = sum(abs(j["wrong"]) for j in jobs)
    print(f"wrong elements in all jobs: {wrong_elems}")
    for j in by.get("wrong", []):
        viol.append(f"job {j['tag']} had wrong elements ({j['wrong']}): {j['error']}")
    for j in by.get("hang", []):
        viol.append(f"job {j['tag']} hung (rc {j['rc']}, {j['end_ms'] - j['start_ms']} ms): {j['error']}")
    # Every failure must follow a fault (within the bound before it started,
    # or during it) and end within the bound of max(its start, that fault).
    lat = []
    for j in by.get("failed", []):
        prior = [f["t"] for f in faults if f["t"] <= j["end_ms"]]
        last = max(prior) if prior else None
        if last is None or last < j["start_ms"] - bound_ms:
            viol.append(f"job {j['tag']} failed without a fault during it or {bound_ms} ms before: {j['error']}")
            continue
        since = j["end_ms"] - max(j["start_ms"], last)
        lat.append(since)
        j["fail_ms"] = since
        if since > bound_ms:
            viol.append(f"job {j['tag']} failed {since} ms after the fault/its start (bound {bound_ms} ms): "
                        f"{j['error']}")
        if not j["error"]:
            viol.append(f"job {j['tag']} failed without an error message (rc {j['rc']})")
    if lat:
        print(f"failure latency (from the later of the job's start and the last fault): "
              f"max {max(lat)} ms, median {int(statistics.median(lat))} ms; bound {bound_ms} ms")
    for j in by.get("failed", []):
        print(f"  {j['tag']}: {j['kind']} after {j.get('fail_ms', '?')} ms: {j['error'][:160]}")
    # Recovery: fault -> end of the first exact job that started after it.
    ex = sorted((j for j in jobs if j["status"] == "exact"), key=lambda j: j["start_ms"])
    rec = {}
    for f in faults:
        nxt = next((j for j in ex if j["start_ms"] >= f["t"]), None)
        if nxt is not None:
            rec.setdefault(f["kind"], []).append(nxt["end_ms"] - f["t"])
    print(f"faults {len(faults)}: " + ", ".join(
        f"{k} {sum(1 for f in faults if f['kind'] == k)}" for k in sorted({f['kind'] for f in faults})))
    for k, xs in sorted(rec.items()):
        print(f"  recovery after {k} (kill -> next job exact): min {min(xs)} ms, median "
              f"{int(statistics.median(xs))} ms, max {max(xs)} ms ({len(xs)} faults)")
    if exact:
        durs = [j["end_ms"] - j["start_ms"] for j in ex]
        print(f"exact job wall time: median {int(statistics.median(durs))} ms, max {max(durs)} ms")
    for line in viol:
        print("VIOLATION: " + line)


def rss(args):
    """rss DIR LIMIT_FACTOR LIMIT_EXTRA_KB: per daemon, the first sample (warm
    baseline) against every later one, RSS and fds."""
    d, factor, extra_kb, extra_fds = args[0], float(args[1]), int(args[2]), int(args[3])
    rows = []
    for line in open(os.path.join(d, "samples.tsv")):
        f = line.split("\t")
        if len(f) >= 6:
            rows.append((int(f[0]), f[1], f[2], int(f[3]), int(f[4]), int(f[5])))
    viol = []
    names = sorted({r[2] for r in rows})
    for n in names:
        rs = [r for r in rows if r[2] == n]
        base = rs[0]
        last = rs[-1]
        mx = max(rs, key=lambda r: r[4])
        mxf = max(rs, key=lambda r: r[5])
        pids = len({r[3] for r in rs})
        print(f"  {n}: RSS {base[4] / 1024:.1f} MiB at the start ({base[1]}), {last[4] / 1024:.1f} MiB at the end, "
              f"max {mx[4] / 1024:.1f} MiB ({mx[1]}); fds {base[5]} -> {last[5]}, max {mxf[5]}; "
              f"{pids} processes (restarts {pids - 1})")
        limit = max(base[4] * factor, base[4] + extra_kb)
        if mx[4] > limit:
            viol.append(f"{n}: RSS {mx[4]} kB ({mx[1]}) above the bound {int(limit)} kB "
                        f"(max({factor} x {base[4]}, {base[4]} + {extra_kb}))")
        if mxf[5] > base[5] + extra_fds:
            viol.append(f"{n}: {mxf[5]} fds ({mxf[1]}), more than {base[5]} at the start + {extra_fds}")
    for line in viol:
        print("VIOLATION: " + line)


if __name__ == "__main__":
    cmd = sys.argv[1]
    {"job": job, "summary": summary, "rss": rss}[cmd](sys.argv[2:])
