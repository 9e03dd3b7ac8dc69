#!/usr/bin/env python3
"""What an agent costs while its workers run: peak RSS, threads, and CPU used over a window.

Every launcher below runs at the same time, each with 2 workers that only wait
(bench_worker hold); once all workers are running the benchmark samples each agent process
for --seconds (60): its CPU time (user + system, all threads) over the window as a share of
one core, its peak RSS (VmHWM), its private memory (RssAnon) and PSS (shared library pages
divided among the processes that map them), and its most threads.

  ddprun standalone         --standalone, one node, no gRPC loaded
  ddprun c10d host          node 1 of 2 on loopback: its agent also serves the master
  ddprun c10d client        node 2 of 2: an agent with a gRPC session to the master
  torchrun-0.1s, torchrun-1.13-default: --standalone with --monitor_interval 0.1 and 5

  bench/footprint.py --ddprun build/launcher/ddprun --worker build/bench/bench_worker
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from procs import (
    cpu_seconds, free_port, launcher_parser, parse_launcher_args, proc_status, pss_kib,
    torch_available, torchrun_cmd, wait_for)
from report import write_json


def launchers(work):
    """name -> (commands to start, the index of the agent to watch, start files to wait for)."""
    standalone = ["--standalone", "--nproc_per_node=2", "--no_python"]

    def job(name):
        d = os.path.join(work, name)
        os.makedirs(d)
        return d

    out = {}
    d = job("ddprun-standalone")
    out["ddprun standalone"] = ([[ARGS.ddprun, *standalone, ARGS.worker, d, "hold"]], 0,
                                [f"{d}/start.{r}.0" for r in (0, 1)])
    d = job("ddprun-c10d")
    port = free_port()
    c10d = ["--nnodes=2", "--nproc_per_node=2", "--rdzv_backend=c10d",
            f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=footprint", "--no_python"]
    cmds = [[ARGS.ddprun, "--local_addr=127.0.0.1", *c10d, ARGS.worker, d, "hold"],
            [ARGS.ddprun, "--local_addr=127.0.0.2", "--rdzv_conf=is_host=0", *c10d, ARGS.worker,
             d, "hold"]]
    files = [f"{d}/start.{r}.0" for r in range(4)]
    out["ddprun c10d host"] = (cmds, 0, files)
    out["ddprun c10d client"] = (None, 1, files)  # the same job, its other agent
    if not ARGS.no_torchrun:
        for name, interval in (("torchrun-0.1s", "0.1"), ("torchrun-1.13-default", "5")):
            d = job(name)
            out[name] = ([torchrun_cmd(interval, [*standalone, ARGS.worker, d, "hold"])], 0,
                         [f"{d}/start.{r}.0" for r in (0, 1)])
    return out


def main():
    if not ARGS.no_torchrun and not torch_available():
        sys.exit("torchrun needs Debian's python3-torch (scripts/install-deps.sh); "
                 "or pass --no-torchrun")
    work = tempfile.mkdtemp(prefix="ddprun-footprint-")
    env = dict(os.environ, OMP_NUM_THREADS="1", LOGLEVEL="ERROR")
    procs = []
    try:
        plan = launchers(work)
        agents = {}
        last_started = None
        for name, (cmds, watch, files) in plan.items():
            if cmds is not None:
                last_started = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL,
                                                 start_new_session=True) for c in cmds]
                procs += last_started
            agents[name] = (last_started[watch].pid, files)
        for _, files in agents.values():
            wait_for(files, 120)
        time.sleep(1)  # past start-up: the window is the steady state
        cpu0 = {name: cpu_seconds(pid) for name, (pid, _) in agents.items()}
        threads = {name: 0 for name in agents}
        t0 = time.monotonic()
        while time.monotonic() - t0 < ARGS.seconds:
            for name, (pid, _) in agents.items():
                threads[name] = max(threads[name], proc_status(pid, "Threads"))
            time.sleep(min(5, ARGS.seconds))
        window = time.monotonic() - t0
        results = {}
        for name, (pid, _) in agents.items():
            results[name] = {
                "peak_rss_mib": proc_status(pid, "VmHWM") / 1024,
                # Most of an agent's RSS is shared library pages; these say what it owns.
                "private_mib": proc_status(pid, "RssAnon") / 1024,
                "pss_mib": pss_kib(pid) / 1024,
                "threads": threads[name],
                "cpu_percent_of_a_core": 100 * (cpu_seconds(pid) - cpu0[name]) / window,
                "window_s": window,
            }
        for d in os.listdir(work):
            if os.path.isdir(os.path.join(work, d)):
                open(os.path.join(work, d, "release"), "w").close()
        for p in procs:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'agent':<24}{'peak RSS':>10}{'private':>10}{'PSS':>8}{'threads':>9}"
          f"{'CPU over ' + str(int(window)) + ' s':>18}   (MiB; CPU in % of one core)")
    for name, r in results.items():
        print(f"{name:<24}{r['peak_rss_mib']:>10.1f}{r['private_mib']:>10.1f}{r['pss_mib']:>8.1f}"
              f"{r['threads']:>9}{r['cpu_percent_of_a_core']:>17.3f}%")
    write_json(ARGS.json, results)


if __name__ == "__main__":
    parser = launcher_parser(__doc__)
    parser.add_argument("--seconds", type=float, default=60)
    ARGS = parse_launcher_args(parser)
    main()
