#!/usr/bin/env python3
"""Every benchmark in one go: each prints its table and writes RESULTS/<name>.json; then the
plots (RESULTS/restart.png, RESULTS/scale.png). scripts/bench.sh builds and calls this.

  single_node.py  launch (2 and 8 workers), whole job, restart, peak RSS; torchrun beside it
  multi_node.py   2 and 4 agents on loopback: launch, restart, agent loss; torchrun beside it
  hangs.py        FileTimer expiry, uninterruptible sleep, the whole-job hang report (2, 4 agents)
  binding.py      launch and restart with --cpu-affinity and --numa-binding against none
  footprint.py    agents idling with their workers for 60 s: RSS, threads, CPU
  scale.py        one master and 100 .. 16,384 simulated agents; the bare gRPC floor
  store.py        Store ops/s and latency with 1, 16 and 256 clients; the bare gRPC floor
  store_scale.py  1,024 .. 16,384 torch clients meeting on ddprun's and torch's TCPStore
  tls_scale.py    1,000 .. 10,000 simulated agents over mutual TLS against plaintext
  etcd_scale.py   100 .. 4,000 simulated agents electing their leader on a 3-member etcd

  bench/run_all.py --build build --out bench-results [--no-torchrun] [--quick]
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--no-torchrun", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="fewer runs, 10 s of footprint, N up to 1,000: a check, not figures")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    launcher = [f"--ddprun={build}/launcher/ddprun", f"--worker={build}/bench/bench_worker"]
    torch = ["--no-torchrun"] if args.no_torchrun else []
    quick = args.quick
    steps = [
        ("single_node", [*launcher, *torch, "--runs", "3" if quick else "10",
                         "--torchrun-runs", "2" if quick else "5"]),
        ("multi_node", [*launcher, *torch, "--runs", "3" if quick else "10",
                        "--torchrun-runs", "1" if quick else "3", "--loss-timeout",
                        "10" if quick else "30"]),
        ("footprint", [*launcher, *torch, "--seconds", "10" if quick else "60"]),
        ("scale", [f"--build={build}", *(["--agents", "100", "1000", "--news-agents", "1024",
                                           "--runs", "1"] if quick else [])]),
        ("store", [f"--build={build}"]),
        ("store_scale", [f"--build={build}", *(["--clients", "1024", "--runs", "1"] if quick
                                               else [])]),
        ("tls_scale", [f"--build={build}", *(["--agents", "1000", "--runs", "1"] if quick
                                             else [])]),
        ("etcd_scale", [f"--build={build}", *(["--agents", "100", "1000"] if quick else
                                              ["--runs", "3"])]),
        ("torch_restart", [f"--ddprun={build}/launcher/ddprun", *torch,
                           "--runs", "1" if quick else "5"]),
        ("hangs", [f"--ddprun={build}/launcher/ddprun",
                   f"--test-worker={build}/tests/integration/test_worker",
                   "--runs", "2" if quick else "5"]),
        ("binding", [*launcher, "--runs", "5" if quick else "40"]),
    ]
    failed = []
    for name, extra in steps:
        print(f"\n=== {name} ===", flush=True)
        t0 = time.monotonic()
        rc = subprocess.run([sys.executable, os.path.join(HERE, f"{name}.py"), *extra,
                             "--json", os.path.join(out, f"{name}.json")]).returncode
        print(f"({name}: {time.monotonic() - t0:.0f} s)", flush=True)
        if rc != 0:
            failed.append(name)
    subprocess.run([sys.executable, os.path.join(HERE, "plot.py"), out])
    print(f"\nJSON and plots in {out}")
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
