#!/usr/bin/env python3
"""vs_slurm.py: Einsora against Slurm on the same fleet and the same stream (bench/vs-slurm).

16 nodes x 8 GPUs of two types; 2,000 one-GPU and 200 eight-GPU jobs, each holding its GPUs
2 s, fed by 4 submitters as fast as they are accepted. Each system runs on its own: stock
Slurm, tuned Slurm, then Einsora at each heartbeat asked for. Printed per system: accepted/s,
makespan and its lower bounds (GPU-seconds / GPUs; whole holds per GPU), placements/s, wait
p50/p99 (all, one-GPU, eight-GPU), GPU-seconds idle while requests of that type waited, and
each figure's ratio to tuned Slurm.

"Placed" (the end of a wait): Slurm, the job's `sched: Allocate JobId=` (or backfill's
`Started JobId=`) line in slurmctld's log (ms, LogTimeFormat=iso8601_ms; StartTime has only
1 s); Einsora, the request's `request.active` event (its agent started it; ms). A wait starts
at the submission as each system logged it; the makespan runs from the first submission call
to the last job's end. A job holds its GPUs `--hold` s from its start: Slurm's runs `sleep`;
Einsora's is released at its `request.active` event's time + hold, by 16 releasers side by
side (so the bench's own releases do not queue behind one another). A benchmark, not a test.

For Einsora it also prints the CPU time per job (user + system, from the submissions to the
last job's end) of its agents together, its control plane, and the bench's own process (the
submitters, the event follower and the releasers), which share the machine's cores with them:
on a shared machine a cost per job says more than a latency.

The agents' latency alone (placed -> active p50/p99, the ms an agent takes to learn of and
start its work, whatever its heartbeat): `bench/vs-slurm/run --systems einsora --heartbeats
1,5,10`.
"""
import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import einsora  # noqa: E402
import slurm  # noqa: E402

TYPES = [("h100", "nvidia-h100-80gb"), ("h200", "nvidia-h200-141gb")]
NODES_PER_TYPE = 8
GPUS_PER_NODE = 8


def make_stream(n1, n8, seed):
    jobs = [(1, i % 2) for i in range(n1)] + [(8, i % 2) for i in range(n8)]
    random.Random(seed).shuffle(jobs)
    return jobs


def submit_all(stream, submitters, submit_one):
    """Feed the stream from `submitters` threads; returns (ids as {id: (gpus, type)}, t0, t_last)."""
    ids = {}
    lock = threading.Lock()
    errors = []
    t0 = time.time()
    last = [t0]

    def worker(k):
        try:
            for gpus, t in stream[k::submitters]:
                jid = submit_one(gpus, t)
                now = time.time()
                with lock:
                    ids[jid] = (gpus, t)
                    last[0] = max(last[0], now)
        except Exception as e:  # reported below, the run fails
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(submitters)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return ids, t0, last[0]


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def figures(recs, ids, t0, t_accepted, hold_s):
    """recs: {id: {"submitted", "placed", "ended"}}; ids: {id: (gpus, type)}."""
    missing = [j for j in ids if not all(k in recs.get(j, {}) for k in ("submitted", "placed", "ended"))]
    if missing:
        raise RuntimeError("%d jobs have no full timeline (e.g. %s)" % (len(missing), missing[:5]))
    f = {}
    n = len(ids)
    f["accepted/s"] = n / max(1e-9, t_accepted - t0)
    # A slower intake spreads the arrivals: its waits start later, so compare waits with it.
    f["submit span s"] = t_accepted - t0
    f["makespan s"] = max(recs[j]["ended"] for j in ids) - t0
    gpu_s = [0.0] * len(TYPES)
    for gpus, t in ids.values():
        gpu_s[t] += gpus * hold_s
    f["lower bound s"] = max(g / (NODES_PER_TYPE * GPUS_PER_NODE) for g in gpu_s)
    # Holds are whole: a GPU runs a whole number of them, so some GPU of a type runs at least
    # ceil(its type's GPU-holds / its GPUs) of them one after another (2,000 + 200 x 8 jobs:
    # 1,800 per type on 64 GPUs, 29 holds of 2 s = 58 s, not 56.25).
    holds = [0] * len(TYPES)
    for gpus, t in ids.values():
        holds[t] += gpus
    f["lower bound, whole holds s"] = max(math.ceil(h / (NODES_PER_TYPE * GPUS_PER_NODE)) * hold_s
                                          for h in holds)
    placed = [recs[j]["placed"] for j in ids]
    f["placements/s"] = n / max(1e-9, max(placed) - min(placed))
    for label, sel in (("all", None), ("1-GPU", 1), ("8-GPU", 8)):
        w = [recs[j]["placed"] - recs[j]["submitted"] for j, (g, _) in ids.items() if sel is None or g == sel]
        f["wait p50 %s s" % label] = pct(w, 50)
        f["wait p99 %s s" % label] = pct(w, 99)
    # GPU-seconds idle while a request of the same type waited: a sweep over the changes.
    idle = 0.0
    for t in range(len(TYPES)):
        ev = []
        for j, (g, tt) in ids.items():
            if tt != t:
                continue
            r = recs[j]
            ev += [(r["submitted"], 0, 1), (r["placed"], g, -1), (r["ended"], -g, 0)]
        ev.sort()
        busy = waiting = 0
        prev = ev[0][0] if ev else 0
        for when, dg, dw in ev:
            if waiting > 0:
                idle += (NODES_PER_TYPE * GPUS_PER_NODE - busy) * (when - prev)
            busy += dg
            waiting += dw
            prev = when
    f["GPU-s idle while waiting"] = idle
    return f


def cpu_ticks():
    """(stolen, total) CPU ticks of the machine so far (/proc/stat's first line)."""
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    return (v[7] if len(v) > 7 else 0), sum(v[:8])


def stolen_pct(t0, t1):
    """The share of the machine's CPU time the hypervisor gave to others between two cpu_ticks():
    on a shared VM the figures of a run with much stolen time say more about the host than
    about the system under test."""
    return 100.0 * (t1[0] - t0[0]) / max(1, t1[1] - t0[1])


STOLEN = "CPU stolen %"
NO_RATIO = {STOLEN}


def run_slurm(stream, args, tuned, root):
    c = slurm.SlurmCluster(os.path.join(root, "slurm-" + ("tuned" if tuned else "stock")), TYPES,
                           NODES_PER_TYPE, GPUS_PER_NODE, tuned)
    os.makedirs(c.root)
    try:
        c.start()
        ticks0 = cpu_ticks()
        ids, t0, t_acc = submit_all(stream, args.submitters, lambda g, t: c.submit(g, TYPES[t][0]))
        deadline = time.time() + args.timeout
        while not c.queue_empty():
            if time.time() > deadline:
                raise RuntimeError("Slurm did not finish within %d s" % args.timeout)
            time.sleep(0.5)
        stolen = stolen_pct(ticks0, cpu_ticks())
        time.sleep(1)  # the last completions reach the log
        conf = c.config_text()
    finally:
        c.stop()
    f = figures(c.timeline(), ids, t0, t_acc, args.hold)
    f[STOLEN] = stolen
    return f, conf


def run_einsora(stream, args, heartbeat, root, rep=0):
    tag = "einsora-hb%d" % heartbeat + ("-run%d" % (rep + 1) if args.repeat > 1 else "")
    fl = einsora.EinsoraFleet(os.path.join(root, tag), args.einsora, args.catalog,
                              args.fixtures, args.fake_nvml, TYPES, NODES_PER_TYPE, heartbeat)
    extra = {}
    try:
        fl.start()
        apis = {}
        lock = threading.Lock()

        def submit_one(g, t):
            tid = threading.get_ident()
            with lock:
                api = apis.setdefault(tid, einsora.Api(fl.port, fl.admin))
            return fl.submit(api, g, TYPES[t][1])

        result = {}
        cpu0, own0, ticks0 = fl.cpu_s(), os.times(), cpu_ticks()
        deadline = time.time() + args.timeout
        follower = threading.Thread(target=lambda: result.update(
            fl.run_holds(len(stream), args.hold, lambda: time.time() > deadline)))
        follower.start()
        ids, t0, t_acc = submit_all(stream, args.submitters, submit_one)
        follower.join()
        cpu1, own1 = fl.cpu_s(), os.times()
        extra[STOLEN] = stolen_pct(ticks0, cpu_ticks())
        for who in ("agents", "server"):
            extra["%s CPU ms/job" % who] = (cpu1[who] - cpu0[who]) * 1000 / len(stream)
        extra["bench CPU ms/job"] = ((own1.user + own1.system) - (own0.user + own0.system)) * 1000 / len(stream)
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)  # like any output path a user names
            with open(os.path.join(args.dump, tag + ".json"), "w") as fh:
                json.dump({"t0": t0, "ids": ids, "events": result}, fh)
            with open(os.path.join(args.dump, tag + "-metrics.txt"), "w") as fh:
                fh.write(fl.metrics_text())
        recs = {}
        for j, r in result.items():
            if "active" in r:
                recs[j] = {"submitted": r.get("submitted"), "placed": r["active"], "ended": r.get("ended")}
                if "placed" in r:
                    extra.setdefault("lat", []).append(r["active"] - r["placed"])
    finally:
        fl.stop()
        if args.dump:
            shutil.copytree(os.path.join(fl.root, "log"), os.path.join(args.dump, tag + "-log"),
                            dirs_exist_ok=True)
    f = figures(recs, ids, t0, t_acc, args.hold)
    lat = extra.get("lat", [])
    f["placed->active p50 ms"] = pct(lat, 50) * 1000
    f["placed->active p99 ms"] = pct(lat, 99) * 1000
    for k in ("agents CPU ms/job", "server CPU ms/job", "bench CPU ms/job", STOLEN):
        f[k] = extra[k]
    return f, lat


def run_einsora_repeated(stream, args, heartbeat, root):
    """--repeat N runs of one heartbeat: each figure is the median of the runs', but the
    placed -> active percentiles are those of all the runs' placements together (a single
    run's p99 rests on its 22 slowest placements, a few bursts of this machine)."""
    runs, lat = [], []
    for rep in range(args.repeat):
        f, l = run_einsora(stream, args, heartbeat, root, rep)
        runs.append(f)
        lat += l
    f = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    f["placed->active p50 ms"] = pct(lat, 50) * 1000
    f["placed->active p99 ms"] = pct(lat, 99) * 1000
    return f, [r["placed->active p99 ms"] for r in runs]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.abspath(os.path.join(here, "..", ".."))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--einsora", default=os.path.join(repo, "build/release/src/cli/einsora"),
                    help="the einsora binary (control plane and agents)")
    ap.add_argument("--fake-nvml", default=os.path.join(repo, "build/release/tests/agent/libnvidia-ml.so.1"),
                    help="the fake NVML library the agents load for their fixture GPUs")
    ap.add_argument("--catalog", default=os.path.join(repo, "data/catalog.yaml"),
                    help="the GPU class catalog the control plane loads")
    ap.add_argument("--fixtures", default=os.path.join(repo, "tests/fixtures/machines"),
                    help="the fixture machines (sysfs trees) the agents discover")
    ap.add_argument("--one-gpu", type=int, default=2000, help="one-GPU jobs in the stream")
    ap.add_argument("--eight-gpu", type=int, default=200, help="eight-GPU jobs in the stream")
    ap.add_argument("--hold", type=float, default=2.0, help="seconds each job holds its GPUs")
    ap.add_argument("--submitters", type=int, default=4, help="concurrent submitting clients per system")
    ap.add_argument("--heartbeats", default="1,10", help="Einsora agent heartbeats to run, comma-separated")
    ap.add_argument("--systems", default="slurm-stock,slurm-tuned,einsora",
                    help="systems to run, comma-separated (einsora alone needs no Slurm)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds a system may take for the stream")
    ap.add_argument("--seed", type=int, default=18, help="seed of the stream's order of jobs")
    ap.add_argument("--dump", metavar="DIR",
                    help="write each Einsora run's per-request timeline (JSON), its control plane's "
                         "/metrics at the end and its logs there")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run Einsora N times per heartbeat: median figures, placed->active "
                         "percentiles over all N runs' placements")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be 1 or more")
    systems = args.systems.split(",")
    stream = make_stream(args.one_gpu, args.eight_gpu, args.seed)
    print("bench vs-slurm: %d nodes x %d GPUs (%s), %d one-GPU + %d eight-GPU jobs holding %.0f s, %d submitters"
          % (NODES_PER_TYPE * len(TYPES), GPUS_PER_NODE, " + ".join("%d %s" % (NODES_PER_TYPE, t) for t, _ in TYPES),
             args.one_gpu, args.eight_gpu, args.hold, args.submitters))
    print("machine: %d cores, load %s" % (os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("placed: Slurm = slurmctld log 'sched: Allocate JobId=' / backfill 'Started JobId=' (ms); "
          "Einsora = request.active (its agent started it; event feed, ms)")
    results = {}
    per_run_p99 = {}
    conf = None
    with tempfile.TemporaryDirectory(prefix="vs-slurm-") as root:
        for s in systems:
            if s.startswith("slurm"):
                if not slurm.installed():
                    sys.exit("vs-slurm: Slurm is not installed (bench/vs-slurm/run installs it)")
                tuned = s == "slurm-tuned"
                print("running %s ..." % s, flush=True)
                results[s], c = run_slurm(stream, args, tuned, root)
                if tuned:
                    conf = c
            elif s == "einsora":
                for hb in [int(x) for x in args.heartbeats.split(",")]:
                    print("running einsora at heartbeat %d s%s ..."
                          % (hb, " (%d runs)" % args.repeat if args.repeat > 1 else ""), flush=True)
                    results["einsora-hb%d" % hb], per_run_p99["einsora-hb%d" % hb] = \
                        run_einsora_repeated(stream, args, hb, root)
            else:
                sys.exit("vs-slurm: unknown system %s" % s)
    if conf:
        print("\ntuned Slurm (stock differs only in SchedulerParameters, absent):")
        for line in conf.splitlines():
            if not line.startswith(("NodeName", "PartitionName")) and "=" in line and "/tmp" not in line:
                print("  " + line)
    base = "slurm-tuned" if "slurm-tuned" in results else None
    cols = list(results)
    rows = []
    for name in cols:
        for k in results[name]:
            if k not in rows:
                rows.append(k)
    head = "%-28s" % "figure" + "".join("%14s" % c for c in cols)
    if base:
        head += "".join("%14s" % ("%s/tuned" % c.replace("einsora-", "").replace("slurm-", ""))
                        for c in cols if c != base)
    print("\n" + head)
    for k in rows:
        line = "%-28s" % k
        for c in cols:
            v = results[c].get(k)
            line += "%14s" % ("-" if v is None else "%.3f" % v if abs(v) < 10 else "%.1f" % v)
        if base:
            b = results[base].get(k)
            for c in cols:
                if c == base:
                    continue
                v = results[c].get(k)
                line += "%14s" % ("-" if v is None or not b or k in NO_RATIO else "%.2fx" % (v / b))
        print(line)
    if args.repeat > 1:
        print("\nEinsora: the median of %d runs per heartbeat; placed->active p50/p99 over all their "
              "placements. Each run's own p99 (ms):" % args.repeat)
        for c, v in per_run_p99.items():
            print("  %-14s %s" % (c, " ".join("%.0f" % x for x in v)))
    print("\n%s: the share of the machine's CPU time its hypervisor gave to other guests while the "
          "system ran the stream (a run with much of it measured the host more than the system)" % STOLEN)
    print("ratio: the system's figure / tuned Slurm's (accepted/s and placements/s: higher is better; "
          "makespan, waits, idle GPU-s: lower is better)")


if __name__ == "__main__":
    main()
