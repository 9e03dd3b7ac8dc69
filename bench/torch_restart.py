#!/usr/bin/env python3
"""A real PyTorch job's restart, where the time goes: torchrun, ddprun, and ddprun with its
warm pool (--preload=torch), side by side in the same run.

One rank of a DDP job (bench/restart_job.py: gloo, Debian's python3-torch) exits 1 once every
rank is past a few steps; the job restarts (--max-restarts=1). Measured, from the crash (the
crashing rank writes the time just before it exits) to the moment every rank of the new
attempt is past each step of its start (each rank writes those times itself):

  first_line_ms   the launcher's part: detection, stopping the survivors, the rendezvous,
                  starting the processes, and the interpreter up to the script's first line
                  (with the pool: the fork, up to the script's first line, torch imported)
  imported_ms     ... and `import torch` done in every rank
  grouped_ms      ... and init_process_group done in every rank
  all_reduce_ms   ... and the first all-reduce (DDP's first backward) done in every rank
  launch_ms       from starting the launcher(s) to every rank of the first attempt past its
                  first all-reduce (the first launch)

For ddprun, from its log (LOGLEVEL=DEBUG): detected_ms (crash -> the agent's "failed" line),
started_ms (crash -> the last agent's "attempt 1: started" line) and fork_to_script_ms (per
worker of the second attempt: from the moment the agent began to start it to its script's
first line; the median over workers), and the restart's split the agents print
(docs/observability.md#every-restart-explained), each part the longest any agent said:
split_detection_ms, split_stop_ms, split_rendezvous_ms, split_spawn_ms, split_connected_ms
(every rank's store client connected: the interpreter, imports and the script up to
init_process_group), split_barrier_ms, split_total_ms. A one-node job's store is in its rank
0 worker: its split ends at spawn.

Shapes: 1x8 (one node, 8 workers, --standalone) and 2x2 (two agents on loopback, c10d, 2
workers each; ddprun's agents tell themselves apart by --local-addr=127.0.0.N, torch 1.13's by
pid). torchrun is 1.13.1 through tests/compat/torchrun_py311.py with --monitor_interval=0.1.

  bench/torch_restart.py --ddprun build/launcher/ddprun [--runs 5] [--json out.json]
"""
import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from procs import TORCH_PYTHON, free_port, torchrun_cmd, torch_available
from report import summarize, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "restart_job.py")
SHAPES = {"1x8": (1, 8, 5), "2x2": (2, 2, 3)}  # nodes, workers per node, the rank that crashes
LOG_LINE = re.compile(r"^\[ddprun\] (\S+ \S+) \w+: (.*)$")
STARTED = re.compile(r"started local_rank=\d+ rank=(\d+) pid=\d+ in ([0-9.]+) ms")
SPLIT = re.compile(r"restart 1 \(round \d+\) took (\d+) ms on this node: (.*)$")
SPLIT_PART = re.compile(r"(detection|stop|rendezvous|spawn|every rank connected to the store|"
                        r"store barrier passed) (\d+) ms")
PART_NAMES = {"every rank connected to the store": "connected", "store barrier passed": "barrier"}


def commands(launcher, shape, out, port):
    nodes, nproc, crash_rank = SHAPES[shape]
    job = [JOB, out, str(crash_rank)]
    if launcher == "torchrun":
        opts = [f"--nproc_per_node={nproc}", "--max_restarts=1"]
        if nodes == 1:
            return [torchrun_cmd("0.1", ["--standalone", *opts, *job])]
        return [torchrun_cmd("0.1", [f"--nnodes={nodes}", "--rdzv_backend=c10d",
                                     f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=bench",
                                     *opts, *job]) for _ in range(nodes)]
    ddprun = [ARGS.ddprun, f"--nproc-per-node={nproc}", "--max-restarts=1"]
    if launcher == "ddprun --preload":
        ddprun.append("--preload=torch")
    if nodes == 1:
        return [[*ddprun, "--standalone", *job]]
    return [[*ddprun, f"--nnodes={nodes}", "--rdzv-backend=c10d",
             f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=bench",
             f"--local-addr=127.0.0.{n + 1}", *(["--rdzv-conf=is_host=0"] if n else []), *job]
            for n in range(nodes)]


def read_times(out, attempt, ranks):
    times = []
    for rank in range(ranks):
        with open(os.path.join(out, f"times.{attempt}.{rank}")) as f:
            times.append([float(v) for v in f.read().split()])
    return times


def log_lines(text):
    for line in text.splitlines():
        m = LOG_LINE.match(line)
        if m:
            when = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S.%f").timestamp()
            yield when, m[2]


def from_logs(logs, crash, first_lines):
    """ddprun's own view: detection, workers started, and each worker's fork (or spawn) to
    its script's first line."""
    detected, started, fork_to_script = [], [], []
    split = {}  # each part of the restart's split, the longest any agent said (as the master)
    for text in logs:
        attempt = -1  # of this agent
        for when, message in log_lines(text):
            if "failed (exitcode" in message and "restarting all workers" in message:
                detected.append(when)
            if re.match(r"attempt \d+: started", message):
                attempt += 1
                if attempt == 1:
                    started.append(when)
            m = SPLIT.match(message)
            if m:
                parts = [("total", m[1])] + SPLIT_PART.findall(m[2])
                for name, ms in parts:
                    key = f"split_{PART_NAMES.get(name, name)}_ms"
                    split[key] = max(split.get(key, 0), float(ms))
            m = STARTED.search(message)
            if m and when > crash:  # a worker of the second attempt
                rank, took = int(m[1]), float(m[2]) / 1000
                fork_to_script.append((first_lines[rank] - (when - took)) * 1000)
    out = dict(split)
    if detected:
        out["detected_ms"] = (min(detected) - crash) * 1000
    if started:
        out["started_ms"] = (max(started) - crash) * 1000
    if fork_to_script:
        out["fork_to_script_ms"] = statistics.median(fork_to_script)
    return out


def run_once(launcher, shape):
    nodes, nproc, _ = SHAPES[shape]
    ranks = nodes * nproc
    out = tempfile.mkdtemp(prefix="ddprun-bench-")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHON_EXEC=TORCH_PYTHON, LOGLEVEL="DEBUG")
    try:
        began = time.time()
        procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True) for cmd in commands(launcher, shape, out, free_port())]
        logs = []
        for p in procs:
            try:
                logs.append(p.communicate(timeout=ARGS.timeout)[1])
            except subprocess.TimeoutExpired:
                p.kill()
                logs.append(p.communicate()[1])
        if any(p.returncode != 0 for p in procs):
            print(f"  {launcher} {shape}: exit {[p.returncode for p in procs]}\n"
                  + "\n".join(l[-2000:] for l in logs), file=sys.stderr)
            return None
        first, second = read_times(out, 0, ranks), read_times(out, 1, ranks)
        with open(os.path.join(out, "crash")) as f:
            crash = float(f.read())
        last = [max(t[i] for t in second) for i in range(4)]
        result = {"launch_ms": (max(t[3] for t in first) - began) * 1000}
        for i, name in enumerate(("first_line_ms", "imported_ms", "grouped_ms", "all_reduce_ms")):
            result[name] = (last[i] - crash) * 1000
        if launcher.startswith("ddprun"):
            result.update(from_logs(logs, crash, [t[0] for t in second]))
        return result
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ddprun", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--no-torchrun", action="store_true")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json")
    global ARGS
    ARGS = parser.parse_args()
    if not torch_available():
        sys.exit(f"{TORCH_PYTHON} has no torch: install python3-torch (scripts/install-deps.sh --bench)")
    launchers = ["ddprun --preload", "ddprun"] + ([] if ARGS.no_torchrun else ["torchrun"])
    results = {}
    for shape in ARGS.shapes:
        runs = {l: [] for l in launchers}
        for _ in range(ARGS.runs):  # interleaved: a busy moment hits every launcher alike
            for launcher in launchers:
                r = run_once(launcher, shape)
                if r:
                    runs[launcher].append(r)
        results[shape] = {}
        for launcher, rs in runs.items():
            metrics = sorted({k for r in rs for k in r})
            results[shape][launcher] = {m: summarize([r.get(m) for r in rs]) for m in metrics}
        print_shape(shape, results[shape])
    write_json(ARGS.json, results)


def print_shape(shape, by_launcher):
    print(f"\n{shape}: crash -> every rank past each step (median ms, min-max, n)")
    metrics = ["first_line_ms", "imported_ms", "grouped_ms", "all_reduce_ms", "detected_ms",
               "started_ms", "fork_to_script_ms", "launch_ms", "split_detection_ms",
               "split_stop_ms", "split_rendezvous_ms", "split_spawn_ms", "split_connected_ms",
               "split_barrier_ms", "split_total_ms"]
    print(f"{'':<20}" + "".join(f"{l:>28}" for l in by_launcher))
    for m in metrics:
        cells = ""
        for launcher in by_launcher:
            s = by_launcher[launcher].get(m)
            cells += (f"{s['median']:>10.0f} ({s['min']:.0f}-{s['max']:.0f}, {s['n']})".rjust(28)
                      if s else f"{'-':>28}")
        print(f"{m:<20}{cells}")
    base = by_launcher.get("ddprun --preload", {}).get("all_reduce_ms")
    for launcher, r in by_launcher.items():
        if base and r.get("all_reduce_ms") and launcher != "ddprun --preload":
            print(f"  all_reduce: {launcher} / ddprun --preload = "
                  f"{r['all_reduce_ms']['median'] / base['median']:.1f}x")


ARGS = None

if __name__ == "__main__":
    main()
