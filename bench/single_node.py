#!/usr/bin/env python3
"""Single-node benchmarks, ddprun and torchrun side by side on the same machine, same run.

  launch:  `--standalone --nproc-per-node=N` with a trivial binary worker: from the moment
           the launcher is started to the moment the last worker is running (each worker
           records its own start with the wall clock), and the whole job's wall time.
  restart: rank 1 crashes on the first attempt: from its exit to the moment the last
           replacement worker is running.
  rss:     the agent's peak RSS (VmHWM) while its workers run.

Prints a table and writes JSON (--json). torchrun is Debian's python3-torch 1.13.1 run
through tests/compat/torchrun_py311.py, with its 1.13 default monitor interval (5 s) and
with --monitor-interval 0.1 (the default since PyTorch 2.4).

  bench/single_node.py --ddprun build/launcher/ddprun --worker build/bench/bench_worker
  (--ddprun-portable PATH: a portable build measured beside it, docs/packaging.md)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from procs import (
    launcher_parser, parse_launcher_args, proc_status, time_launch, time_restart,
    torch_available, torchrun_cmd, wait_for)
from report import print_table, summarize, write_json


def launcher_cmd(name, nproc, worker, work_dir, mode, max_restarts=0):
    opts = ["--standalone", f"--nproc_per_node={nproc}", f"--max_restarts={max_restarts}",
            "--no_python"]  # torch 1.13 knows only the underscore spellings
    if name in ARGS.ddpruns:
        return [ARGS.ddpruns[name], *opts, worker, work_dir, mode]
    interval = "5" if name == "torchrun-1.13-default" else "0.1"
    return torchrun_cmd(interval, [*opts, worker, work_dir, mode])


def run_launch(name, nproc):
    work = tempfile.mkdtemp(prefix="ddprun-bench-")
    try:
        return time_launch(launcher_cmd(name, nproc, ARGS.worker, work, "exit"), nproc, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_restart(name, nproc):
    work = tempfile.mkdtemp(prefix="ddprun-bench-")
    try:
        return time_restart(launcher_cmd(name, nproc, ARGS.worker, work, "crash-once", 1), nproc,
                            work, name)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_rss(name, nproc):
    work = tempfile.mkdtemp(prefix="ddprun-bench-")
    try:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        proc = subprocess.Popen(launcher_cmd(name, nproc, ARGS.worker, work, "hold"), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for([f"{work}/start.{r}.0" for r in range(nproc)], 60)
        time.sleep(0.2)  # let the launcher settle into its steady state before sampling
        peak = proc_status(proc.pid, "VmHWM") / 1024
        open(f"{work}/release", "w").close()
        if proc.wait(timeout=60) != 0:
            raise RuntimeError(f"{name} exited {proc.returncode}")
        return peak
    finally:
        shutil.rmtree(work, ignore_errors=True)




def main():
    launchers = list(ARGS.ddpruns)
    if not ARGS.no_torchrun:
        if not torch_available():
            sys.exit("torchrun needs Debian's python3-torch (scripts/install-deps.sh); "
                     "or pass --no-torchrun")
        launchers += ["torchrun-0.1s", "torchrun-1.13-default"]
    results = {}
    for name in launchers:
        runs = ARGS.runs if name in ARGS.ddpruns else ARGS.torchrun_runs
        r = {}
        for nproc in (2, 8):
            launch, wall = zip(*[run_launch(name, nproc) for _ in range(runs)])
            r[f"launch_ms_nproc{nproc}"] = summarize(launch)
            r[f"job_wall_ms_nproc{nproc}"] = summarize(wall)
        r["restart_ms_nproc2"] = summarize([run_restart(name, 2) for _ in range(runs)])
        r["peak_rss_mib"] = summarize([run_rss(name, 2) for _ in range(min(runs, 3))])
        results[name] = r
    print_table(results, "torchrun-0.1s")
    write_json(ARGS.json, results)


if __name__ == "__main__":
    parser = launcher_parser(__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--torchrun-runs", type=int, default=5)
    ARGS = parse_launcher_args(parser)
    main()
