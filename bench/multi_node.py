#!/usr/bin/env python3
"""Multi-node benchmarks on loopback, ddprun and torchrun side by side in the same run.

  launch:  N agents (--nnodes=N, c10d, one trivial binary worker each) started together:
           from starting them to the moment the last worker is running.
  restart: rank 1 crashes on the first attempt (--max-restarts=1): from its exit to the
           moment the last replacement worker on every agent is running.
  loss:    2 agents with --nnodes=1:2; agent 2 is SIGKILLed: from the kill to the moment the
           survivor's worker runs again with WORLD_SIZE=1 (torchrun's survivor is never told;
           it is given --loss-timeout seconds).

Each ddprun agent uses its own loopback address (127.0.0.N) as --local-addr (torch 1.13 has
no such option). torchrun is Debian's
python3-torch 1.13.1 through tests/compat/torchrun_py311.py, with --monitor_interval=0.1
(the default since PyTorch 2.4) and with its 1.13 default of 5 s (not for the loss, which
torchrun never notices with either).

  bench/multi_node.py --ddprun build/launcher/ddprun --worker build/bench/bench_worker
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

from procs import free_port, launcher_parser, parse_launcher_args, read_ns, torchrun_cmd, wait_for
from report import print_table, summarize, write_json


def agent_cmd(launcher, node, nnodes, port, work, mode, max_restarts=0):
    opts = [f"--nnodes={nnodes}", "--nproc_per_node=1", "--rdzv_backend=c10d",
            f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=bench",
            f"--max_restarts={max_restarts}", "--no_python"]
    if launcher in ARGS.ddpruns:
        # Node 1 hosts the master; the others are told so, as a job script would.
        conf = [] if node == 1 else ["--rdzv_conf=is_host=0"]
        return [ARGS.ddpruns[launcher], f"--local_addr=127.0.0.{node}", *conf, *opts, ARGS.worker,
                work, mode]
    # torch 1.13 has no --local_addr: its agents tell themselves apart by pid.
    interval = "5" if launcher == "torchrun-1.13-default" else "0.1"
    return torchrun_cmd(interval, [*opts, ARGS.worker, work, mode])


def start(cmds):
    env = dict(os.environ, OMP_NUM_THREADS="1", LOGLEVEL="ERROR")
    return [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True) for c in cmds]


def finish(procs, timeout=120):
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def run_launch(launcher, agents):
    work = tempfile.mkdtemp(prefix="ddprun-bench-")
    try:
        port = free_port()
        t0 = time.time_ns()
        procs = start([agent_cmd(launcher, n, agents, port, work, "exit") for n in range(1, agents + 1)])
        finish(procs)
        starts = [read_ns(f"{work}/start.{r}.0") for r in range(agents)]
        return (max(starts) - t0) / 1e6
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_restart(launcher, agents):
    work = tempfile.mkdtemp(prefix="ddprun-bench-")
    try:
        port = free_port()
        procs = start([agent_cmd(launcher, n, agents, port, work, "crash-once", 1)
                       for n in range(1, agents + 1)])
        finish(procs)
        crash = read_ns(f"{work}/crash")
        # torchrun restarts a healthy node without counting it (TORCHELASTIC_RESTART_COUNT is
        # per agent there), so its replacement may write start.<rank>.0 again: take each
        # rank's latest start, which must come after the crash.
        restarted = []
        for r in range(agents):
            starts = [read_ns(f"{work}/{f}") for f in os.listdir(work)
                      if f.startswith(f"start.{r}.") and not f.endswith(".tmp")]
            latest = max(starts)
            if latest <= crash:
                raise RuntimeError(f"{launcher} did not restart rank {r}")
            restarted.append(latest)
        return (max(restarted) - crash) / 1e6
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_loss(launcher):
    work = tempfile.mkdtemp(prefix="ddprun-bench-")
    procs = []
    try:
        port = free_port()
        procs = start([agent_cmd(launcher, n, "1:2", port, work, "hold-world") for n in (1, 2)])
        wait_for([f"{work}/start.0.w2", f"{work}/start.1.w2"], 120)
        killed = time.time_ns()
        os.kill(procs[1].pid, signal.SIGKILL)  # agent 2 (its worker dies with it)
        try:
            wait_for([f"{work}/start.0.w1"], ARGS.loss_timeout)
            return (read_ns(f"{work}/start.0.w1") - killed) / 1e6
        except TimeoutError:
            return None
    finally:
        open(f"{work}/release", "w").close()
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        shutil.rmtree(work, ignore_errors=True)




def main():
    results = {}
    launchers = list(ARGS.ddpruns)
    if not ARGS.no_torchrun:
        launchers += ["torchrun-0.1s", "torchrun-1.13-default"]
    for launcher in launchers:
        runs = ARGS.runs if launcher in ARGS.ddpruns else ARGS.torchrun_runs
        r = {}
        for case, run in (("launch", run_launch), ("restart", run_restart)):
            if case in ARGS.cases:
                for agents in (2, 4):
                    r[f"{case}_ms_{agents}_agents"] = summarize(
                        [run(launcher, agents) for _ in range(runs)])
        # torchrun never tells the survivor with either interval; once is enough to show it.
        if "loss" in ARGS.cases and launcher != "torchrun-1.13-default":
            loss_runs = runs if launcher in ARGS.ddpruns else ARGS.loss_runs
            r["agent_loss_ms"] = summarize([run_loss(launcher) for _ in range(loss_runs)])
        results[launcher] = r
    print_table(results, "torchrun-0.1s", missing=f"never (within {ARGS.loss_timeout:.0f} s)")
    write_json(ARGS.json, results)


if __name__ == "__main__":
    parser = launcher_parser(__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--torchrun-runs", type=int, default=3)
    parser.add_argument("--loss-runs", type=int, default=1)
    parser.add_argument("--loss-timeout", type=float, default=60)
    parser.add_argument("--cases", nargs="+", choices=["launch", "restart", "loss"],
                        default=["launch", "restart", "loss"])
    ARGS = parse_launcher_args(parser)
    main()
