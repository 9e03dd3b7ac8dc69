#!/usr/bin/env python3
"""The Store: set/get/add/wait ops per second and p50/p99 latency with 1, 16 and 256 clients.

Starts a ddprun-master (the Store workers reach through DDPRUN_STORE_ADDR in a multi-node
job) and ddprun-bare-master (whose Store answers at once: a plain gRPC unary round trip, the
floor) on loopback, and runs ddprun-storebench against both. Each client is a thread with
its own worker-SDK Store client.

  bench/store.py --build build --json /tmp/store.json
"""
import argparse
import json
import os
import signal
import subprocess

from procs import free_port, master_cmd, start_server
from report import write_json


def main():
    master_port, bare_port = free_port(), free_port()
    servers = [start_server(master_cmd(ARGS.build), master_port),
               start_server([os.path.join(ARGS.build, "bench", "ddprun-bare-master")], bare_port)]
    try:
        out = subprocess.run([os.path.join(ARGS.build, "bench", "ddprun-storebench"),
                              f"--store=127.0.0.1:{master_port}", f"--bare=127.0.0.1:{bare_port}",
                              f"--ops={ARGS.ops}"],
                             capture_output=True, text=True, timeout=600, check=True)
    finally:
        for s in servers:
            os.killpg(s.pid, signal.SIGTERM)
            s.wait()
    results = json.loads(out.stdout)
    print(f"{'clients':>8} {'op':>16} {'ops/s':>10} {'p50 us':>10} {'p99 us':>10}")
    for clients, ops in results.items():
        for op, r in ops.items():
            print(f"{clients:>8} {op:>16} {r['ops_per_s']:>10.0f} {r['p50_us']:>10.1f} "
                  f"{r['p99_us']:>10.1f}")
    one = results["1"]
    floor = one["bare_grpc_unary"]["p50_us"]
    print("\n1 client, p50 / bare gRPC unary p50: " +
          ", ".join(f"{op} {one[op]['p50_us'] / floor:.2f}x" for op in ("set", "get", "add", "wait")))
    write_json(ARGS.json, results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--ops", type=int, default=8000,
                        help="calls per measurement, shared among the clients")
    parser.add_argument("--json")
    ARGS = parser.parse_args()
    ARGS.build = os.path.abspath(ARGS.build)
    main()
