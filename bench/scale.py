#!/usr/bin/env python3
"""One master against N simulated agents (ddprun-loadgen), and the bare-gRPC floor beside it.

For each N (100, 1,000, 4,000, 10,000, 16,384) and each way of connecting (the sessions sharing at
most 64 connections, or one connection per agent as on a real cluster), --runs runs (3),
each against a fresh master on a fresh loopback port, in which ddprun-loadgen plays N agents
against it; each figure is the median over the runs, with their min and max:

  connect   every connection up
  open      N Session streams opened (stream set-up, before any join)
  round     first join -> every agent holds its round-0 assignment
  restart   one failure report -> every agent stopped and holding the next round (median of 3):
            ddprun-master restarts in place (the round comes with the stop order; group rank
            0's store opens once every agent said it stopped); "ddprun-master-join" is the same
            master with agents that rejoin (three messages per agent, over shared connections
            only), as are all of the bare master's restarts
  news      from the failure report to each agent's stop order, p99 over every agent of
            the run's 3 restarts
  cpu/agent the master's CPU time per agent for the round and for a restart
  rss       the master's peak RSS

Then failure news on its own, for N = 1,024 and 10,000 over 64 connections: 3 restarts, then
one agent goes silent (no heartbeat, connection open) with a keep-alive of 2 s x 3 attempts:
from its last heartbeat to each other agent's stop order, against that 6 s bound.

Then a master restart, for the same N: after the round and 3 restarts the master is SIGKILLed,
a new ddprun-master starts on its port 3 s later, and every agent asks for its place back in
its round (docs/protocol.md#losing-the-master): from the new master's start to every agent
holding its place again, and the new master's peak RSS.

The same load generator runs against ddprun-bare-master (a gRPC server that only counts
joins and hands out ranks) in the same run: the difference is what ddprun's rules cost.
One connection per agent needs a file descriptor per agent on each side; where N is over
`ulimit -Hn` that cell is reported as not possible here, with the limit.

  bench/scale.py --build build --json /tmp/scale.json [--agents 1000 10000] [--runs 3]
"""
import argparse
import os
import resource
import statistics

from procs import master_cmd, run_loadgen
from report import at_least_one, summarize, write_json


def main():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # for the master; loadgen raises its own
    master = master_cmd(ARGS.build)
    # name: (command, the agents' restart path, over shared connections only)
    masters = {
        "ddprun-master": (master, "in-place", False),
        "ddprun-master-join": (master, "join", True),
        "bare-grpc": ([os.path.join(ARGS.build, "bench", "ddprun-bare-master")], "join", False),
    }
    results = {name: {} for name in masters}
    for mode, connections in (("shared-64", 64), ("one-per-agent", 0)):
        for n in ARGS.agents:
            for name, (cmd, restart_path, shared_only) in masters.items():
                if shared_only and connections == 0:
                    continue
                r = run_cell(cmd, n, connections, restart_path)
                results[name][f"{mode}/{n}"] = r
                if "error" in r:
                    print(f"{name:>18} {mode:>14} N={n:>6}: {r['error']}", flush=True)
                    continue
                spread = lambda m: "{min:.0f}-{max:.0f}".format(**r["spread"][m])  # noqa: E731
                print(f"{name:>18} {mode:>14} N={n:>6}: connect {r['connect_ms']:8.1f}  open "
                      f"{r['open_ms']:8.1f}  round {r['round_ms']:8.1f} ({spread('round_ms')})"
                      f"  restart {r['restart_ms']:8.1f} ({spread('restart_ms')}) ms  news p99 "
                      f"{r['news_p99_ms']:6.1f} ms  master cpu/agent "
                      f"{r['master_cpu_us_per_agent_round']:6.1f} us  rss "
                      f"{r['master_peak_rss_mib']:6.1f} MiB  ({r['spread']['round_ms']['n']} of "
                      f"{len(r['runs'])} runs)", flush=True)
    results["failure-news"] = failure_news(master)
    results["master-restart"] = master_restart(master)
    write_json(ARGS.json, results)


# Each cell's figures: one value per run (a restart: the median of the run's 3).
FIGURES = {
    "connect_ms": lambda r: r["connect_ms"],
    "open_ms": lambda r: r["open_ms"],
    "round_ms": lambda r: r["round_ms"],
    "restart_ms": lambda r: statistics.median(r["restart_ms"]),
    "news_p99_ms": lambda r: (r.get("stop_news_ms") or {}).get("p99", 0),
    "master_cpu_us_per_agent_round": lambda r: r["master_cpu_us_per_agent_round"],
    "master_peak_rss_mib": lambda r: r["master_peak_rss_mib"],
}


def run_cell(cmd, agents, connections, restart_path):
    """--runs runs of one cell, each against a fresh master: the median of each figure over
    the runs that completed, their min / median / max ("spread"), and every run's JSON."""
    runs = [run_loadgen(ARGS.build, cmd, agents, connections, restart_path)
            for _ in range(ARGS.runs)]
    done = [r for r in runs if "error" not in r]
    if not done:
        return {"error": runs[-1]["error"], "runs": runs}
    values = {name: [figure(r) for r in done] for name, figure in FIGURES.items()}
    cell = {name: statistics.median(v) for name, v in values.items()}
    cell["spread"] = {name: summarize(v) for name, v in values.items()}
    cell["runs"] = runs
    return cell


def failure_news(master):
    """A crash's and a silent node's news to every other agent, at 1,024 and 10,000 agents."""
    cells = {}
    for n in ARGS.news_agents:
        r = run_loadgen(ARGS.build, master, n, 64, "in-place", ("--silent-node", "--keep-alive=2"))
        cells[str(n)] = r
        if "error" in r:
            print(f"failure news N={n:>6}: {r['error']}", flush=True)
            continue
        crash, silent = r["stop_news_ms"], r["silent_news_ms"]
        print(f"failure news N={n:>6}: crash -> told p50 {crash['p50']:.1f} p99 {crash['p99']:.1f} "
              f"max {crash['max']:.1f} ms; silent -> told p50 {silent['p50']:.0f} p99 "
              f"{silent['p99']:.0f} max {silent['max']:.0f} ms (keep-alive bound "
              f"{r['silent_bound_ms']:.0f} ms)", flush=True)
    return cells


def master_restart(master):
    """A master killed and started again 3 s later: how soon every agent has its place back."""
    cells = {}
    for n in ARGS.news_agents:
        r = run_loadgen(ARGS.build, master, n, 64, "in-place",
                        (f"--restart-master={' '.join(master)}", "--outage=3"))
        cells[str(n)] = r
        if "error" in r:
            print(f"master restart N={n:>6}: {r['error']}", flush=True)
            continue
        m = r["master_restart"]
        print(f"master restart N={n:>6}: killed, a new master 3 s later: every agent back in its "
              f"round {m['back_ms']:.0f} ms after its start; its peak RSS "
              f"{m['new_master_rss_mib']:.1f} MiB", flush=True)
    return cells


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    # 4,000: the size of torchelastic's published rendezvous figure (docs/performance.md).
    parser.add_argument("--agents", type=int, nargs="+", default=[100, 1000, 4000, 10000, 16384])
    parser.add_argument("--news-agents", type=int, nargs="+", default=[1024, 10000])
    parser.add_argument("--runs", type=at_least_one, default=3,
                        help="runs per cell, fresh master each")
    parser.add_argument("--json")
    ARGS = parser.parse_args()
    ARGS.build = os.path.abspath(ARGS.build)
    main()
