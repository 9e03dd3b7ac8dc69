#!/usr/bin/env python3
"""The workers' TCPStore at scale: N torch clients meet on ddprun's agent-served store and on
torch's own server, on the same work, in one run.

Every client connects (VALIDATE, PING), sets its key, passes a store-based barrier and reads
its next rank's key (bench/store_load.cc says exactly what it sends). For each N and each
server, --runs runs against a fresh server: the time until every client connected, passed the
barrier and read its peer's key (min / median / max), and the server's CPU time and peak RSS.

  ddprun       ddprun-storeload --serve: the TcpStoreServer a ddprun agent serves its workers
  torch-2.14   bench/torch_store_server.py in the torch 2.x root ($DDPRUN_TORCH2_ROOT, made by
               scripts/torch2-root.sh), as torchrun's c10d backend makes its store; the row
               names the backend that served (Debian's torch has no libuv: the legacy one)

  bench/store_scale.py --build build --json /tmp/store_scale.json [--clients 1024 4096 16384]
"""
import argparse
import json
import os
import resource
import signal
import subprocess
import time

from report import at_least_one, summarize, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH2_PYTHON = os.path.join(HERE, "..", "tests", "compat", "torch2_python.sh")
PHASES = ("connect_ms", "barrier_ms", "peer_ms")


def start(command):
    """Starts a server that prints its port, then its backend, on stdout."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    port = int(proc.stdout.readline())
    return proc, port, proc.stdout.readline().strip()


def stop(proc):
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def run_cell(command, load, clients, timeout):
    proc, port, backend = start(command)
    try:
        out = subprocess.run([load, f"--connect=127.0.0.1:{port}", f"--clients={clients}",
                              f"--server-pid={proc.pid}", f"--timeout={timeout}"],
                             capture_output=True, text=True, timeout=timeout + 30)
    finally:
        stop(proc)
    if out.returncode != 0:
        return backend, {"error": out.stderr.strip()[-300:]}
    return backend, json.loads(out.stdout)


def servers(build):
    ddprun = [os.path.join(build, "bench", "ddprun-storeload"), "--serve=0"]
    found = {"ddprun": ddprun}
    root = os.environ.get("DDPRUN_TORCH2_ROOT")
    if root and os.path.isdir(root):
        found["torch-2.14"] = [TORCH2_PYTHON, os.path.join(HERE, "torch_store_server.py")]
    else:
        print("store_scale: DDPRUN_TORCH2_ROOT is not set (scripts/torch2-root.sh makes the root, "
              "as root): torch's server is not measured")
    return found


def main():
    # One descriptor per client on each side; the servers inherit this limit.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    load = os.path.join(ARGS.build, "bench", "ddprun-storeload")
    results = {}
    for name, command in servers(ARGS.build).items():
        results[name] = {}
        for clients in ARGS.clients:
            if clients + 64 > hard:
                results[name][str(clients)] = {"error": f"ulimit -Hn is {hard}"}
                continue
            runs, backend, error = [], name, None
            for _ in range(ARGS.runs):
                t0 = time.monotonic()
                backend, r = run_cell(command, load, clients, ARGS.timeout)
                if "error" in r:
                    error = r["error"]
                    break
                runs.append(r)
                print(f"  {name} ({backend}) {clients} clients: connect {r['connect_ms']:.0f} ms, "
                      f"barrier {r['barrier_ms']:.0f} ms, peer {r['peer_ms']:.0f} ms, server CPU "
                      f"{r['server_cpu_ms']:.0f} ms, RSS {r['server_peak_rss_mib']:.0f} MiB "
                      f"({time.monotonic() - t0:.0f} s)", flush=True)
            cell = {"backend": backend, "runs": runs}
            for key in (*PHASES, "server_cpu_ms", "server_peak_rss_mib"):
                cell[key] = summarize([r[key] for r in runs])
            if error:
                cell["error"] = error
                print(f"  {name} {clients} clients: {error}", flush=True)
            results[name][str(clients)] = cell
    print(f"\n{'server':<12} {'clients':>8} {'all connected':>22} {'past the barrier':>22} "
          f"{'peer key read':>22} {'CPU ms':>8} {'RSS MiB':>8}")
    for name, cells in results.items():
        for clients, c in cells.items():
            if not c.get("peer_ms"):
                print(f"{name:<12} {clients:>8}  {c.get('error', 'no run')}")
                continue
            row = "".join(f"{c[p]['min']:>7.0f} /{c[p]['median']:>6.0f} /{c[p]['max']:>6.0f}"
                          for p in PHASES)
            print(f"{name:<12} {clients:>8} {row} {c['server_cpu_ms']['median']:>8.0f} "
                  f"{c['server_peak_rss_mib']['max']:>8.0f}")
    if "torch-2.14" in results:
        for clients, c in results["ddprun"].items():
            t = results["torch-2.14"].get(clients, {})
            if c.get("peer_ms") and t.get("peer_ms"):
                print(f"{clients} clients: torch's server / ddprun's, median time to the last "
                      f"peer key: {t['peer_ms']['median'] / c['peer_ms']['median']:.1f}x")
    write_json(ARGS.json, results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--clients", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--runs", type=at_least_one, default=3)
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds one run may take before it counts as failed")
    parser.add_argument("--json")
    ARGS = parser.parse_args()
    ARGS.build = os.path.abspath(ARGS.build)
    main()
