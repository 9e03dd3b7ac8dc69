#!/usr/bin/env python3
"""What --numa-binding and --cpu-affinity cost at launch: `--standalone
--nproc-per-node=N` with a trivial binary worker, from the moment ddprun is started to the
moment the last worker is running (each worker records its own start), with no binding and
with each way of binding. The variants run interleaved, round after round, so that a slow
moment of the machine touches all of them alike.

  none          no binding
  cpu-affinity  --cpu-affinity with one CPU list per local rank: no topology is read
  numa-node     --numa-binding=node: hwloc reads the topology (in a child process), the
                accelerators are probed
  numa-excl     --numa-binding=exclusive

  bench/binding.py --ddprun build/launcher/ddprun --worker build/bench/bench_worker --runs 40
"""
import os
import shutil
import tempfile

from procs import launcher_parser, parse_launcher_args, time_launch, time_restart
from report import print_table, summarize, write_json


def variants(nproc):
    cpus = sorted(os.sched_getaffinity(0))
    lists = ":".join(str(cpus[r % len(cpus)]) for r in range(nproc))
    return {
        "none": [],
        "cpu-affinity": [f"--cpu-affinity={lists}"],
        "numa-node": ["--numa-binding=node"],
        "numa-excl": ["--numa-binding=exclusive"],
    }


def run_launch(options, nproc):
    work = tempfile.mkdtemp(prefix="ddprun-bench-")
    try:
        command = [ARGS.ddprun, "--standalone", f"--nproc-per-node={nproc}", *options,
                   "--no-python", ARGS.worker, work, "exit"]
        return time_launch(command, nproc, work)[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_restart(options, nproc):
    """Rank 1 crashes on the first attempt: from its exit to the last replacement running."""
    work = tempfile.mkdtemp(prefix="ddprun-bench-")
    try:
        command = [ARGS.ddprun, "--standalone", f"--nproc-per-node={nproc}", "--max-restarts=1",
                   *options, "--no-python", ARGS.worker, work, "crash-once"]
        return time_restart(command, nproc, work, f"ddprun {options}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    nproc = ARGS.nproc
    ways = variants(nproc)
    launch = {name: [] for name in ways}
    restart = {name: [] for name in ways}
    for _ in range(ARGS.runs):
        for name, options in ways.items():
            launch[name].append(run_launch(options, nproc))
            restart[name].append(run_restart(options, nproc))
    # One column per way of binding ("ddprun": none), in the shared table format.
    results = {}
    for name in ways:
        results["ddprun" if name == "none" else name] = {
            f"launch_ms_nproc{nproc}": summarize(launch[name]),
            f"restart_ms_nproc{nproc}": summarize(restart[name]),
        }
    print_table(results, None)
    for name in ways:
        p90 = sorted(launch[name])[int(0.9 * len(launch[name]))]
        print(f"{name:>13}: launch p90 {p90:.1f} ms")
    write_json(ARGS.json, results)


if __name__ == "__main__":
    parser = launcher_parser(__doc__)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--nproc", type=int, default=2)
    ARGS = parse_launcher_args(parser)
    main()
