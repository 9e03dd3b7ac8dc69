#!/usr/bin/env python3
"""TLS at scale: one master against N simulated agents (ddprun-loadgen), mutual TLS against
plaintext, in one run.

For each N (1,000, 4,000, 10,000) and each way of connecting (the sessions sharing at most 64
connections, or one connection per agent as on a real cluster), --runs runs of each, TLS and
plaintext alternating, each against a fresh ddprun-master on a fresh loopback port:

  connect   every connection up (for TLS: every handshake done)
  open      N Session streams opened
  round     first join -> every agent holds its round-0 assignment
  restart   one failure report -> every agent stopped and holding the next round (the median
            of the run's 3 restarts)
  cpu/agent the master's CPU time per agent for the round
  rss       the master's peak RSS

TLS is what `--rdzv-conf tls_cert=...,tls_key=...,tls_ca=...` gives an agent and
`ddprun-master --tls-cert --tls-key --tls-ca` a master: both sides show a certificate signed by
one CA (an EC P-256 key, made here with openssl). The ratio row is TLS over plaintext, of the
medians; the goal is round and restart within 1.3x once connected.

  bench/tls_scale.py --build build --json /tmp/tls_scale.json [--agents 1000 4000] [--runs 3]
"""
import argparse
import os
import resource
import statistics
import subprocess
import tempfile

from procs import master_cmd, run_loadgen
from report import at_least_one, summarize, write_json

METRICS = ("connect_ms", "open_ms", "round_ms", "restart_ms", "master_cpu_us_per_agent_round",
           "master_peak_rss_mib")


def make_certificates(folder):
    """ca.pem and node.{pem,key} (for 127.0.0.1, server and client use) in `folder`."""
    new_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    path = lambda name: os.path.join(folder, name)  # noqa: E731
    with open(path("node.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    for command in (
            ["req", "-x509", *new_key, "-keyout", path("ca.key"), "-out", path("ca.pem"),
             "-days", "2", "-subj", "/CN=ddprun-bench-ca"],
            ["req", *new_key, "-keyout", path("node.key"), "-out", path("node.csr"),
             "-subj", "/CN=ddprun-bench-node"],
            ["x509", "-req", "-in", path("node.csr"), "-CA", path("ca.pem"), "-CAkey",
             path("ca.key"), "-CAcreateserial", "-out", path("node.pem"), "-days", "2",
             "-extfile", path("node.ext")]):
        subprocess.run(["openssl", *command], check=True, capture_output=True)
    return path("node.pem"), path("node.key"), path("ca.pem")


def one_value(result, metric):
    value = result[metric]
    return statistics.median(value) if isinstance(value, list) else value


def main():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # for the master; loadgen raises its own
    master = master_cmd(ARGS.build)
    with tempfile.TemporaryDirectory(prefix="ddprun-tls-bench-") as folder:
        cert, key, ca = make_certificates(folder)
        flags = {"plaintext": ((), ()),
                 "tls": ((f"--tls-cert={cert}", f"--tls-key={key}", f"--tls-ca={ca}"),) * 2}
        results = {}
        for mode, connections in (("shared-64", 64), ("one-per-agent", 0)):
            for n in ARGS.agents:
                runs = {name: [] for name in flags}
                for _ in range(ARGS.runs):
                    for name, (agent_flags, master_flags) in flags.items():
                        r = run_loadgen(ARGS.build, master, n, connections, "in-place",
                                        agent_flags, master_flags)
                        if "error" in r:
                            print(f"{name:>9} {mode:>14} N={n:>6}: {r['error']}", flush=True)
                        runs[name].append(r)
                results[f"{mode}/{n}"] = cell = summarize_cell(runs)
                print_cell(mode, n, cell)
    write_json(ARGS.json, results)


def summarize_cell(runs):
    """min / median / max of each metric over the runs that completed, and the TLS ratio."""
    cell = {"runs": runs}
    for name, results in runs.items():
        done = [r for r in results if "error" not in r]
        cell[name] = {m: summarize([one_value(r, m) for r in done]) for m in METRICS}
    both = [m for m in METRICS if cell["tls"][m] and cell["plaintext"][m]]
    # The master's CPU time reads 0 with a few agents (it counts in clock ticks of 10 ms).
    cell["tls_over_plaintext"] = {m: cell["tls"][m]["median"] / cell["plaintext"][m]["median"]
                                  for m in both if cell["plaintext"][m]["median"] > 0}
    return cell


def print_cell(mode, n, cell):
    for name in ("plaintext", "tls"):
        row = cell[name]
        text = "  ".join(f"{m.removesuffix('_ms')} {row[m]['median']:8.1f}" for m in
                         ("connect_ms", "open_ms", "round_ms", "restart_ms") if row[m])
        cpu, rss = row["master_cpu_us_per_agent_round"], row["master_peak_rss_mib"]
        if cpu and rss:
            text += f" ms  master cpu/agent {cpu['median']:6.1f} us  rss {rss['median']:6.1f} MiB"
        print(f"{name:>9} {mode:>14} N={n:>6}: {text or 'no run completed'}", flush=True)
    ratio = cell["tls_over_plaintext"]
    if ratio:
        print(f"{'tls/plain':>9} {mode:>14} N={n:>6}: " + "  ".join(
            f"{m.removesuffix('_ms')} {ratio[m]:.2f}x" for m in
            ("connect_ms", "round_ms", "restart_ms") if m in ratio), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--agents", type=int, nargs="+", default=[1000, 4000, 10000])
    parser.add_argument("--runs", type=at_least_one, default=3)
    parser.add_argument("--json")
    ARGS = parser.parse_args()
    ARGS.build = os.path.abspath(ARGS.build)
    main()
