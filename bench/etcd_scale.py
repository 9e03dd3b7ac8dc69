#!/usr/bin/env python3
"""The etcd-v3 backend at scale, beside c10d: ddprun-loadgen plays N agents against a
three-member etcd cluster on this machine (Debian's etcd-server, loopback) and one master.

With --etcd, every simulated agent first takes a lease and campaigns for the run's leader key,
and all but the winner watch it, as the etcd-v3 backend's agents do (bench/etcd_load.h); the
leases are renewed through the round and the restarts. Then the round and the restarts run
against the leader's master exactly as with c10d (a ddprun-master stands for the master the
elected agent hosts: the same MasterServer). So the c10d row and the etcd row differ only by
what etcd adds: the election before round 0, and etcd's load while the job runs.

  bench/etcd_scale.py [--build build] [--agents 100 1000 4000] [--runs 1] [--json FILE]

Prints a table; --json writes every run's figures.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import free_port, master_cmd, proc_status, run_loadgen  # noqa: E402
from report import write_json  # noqa: E402

ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"


class EtcdCluster:
    """Three etcd members on loopback, each in a session of its own, in a scratch folder."""

    def __init__(self, members=3):
        self.dir = tempfile.mkdtemp(prefix="ddprun-etcd-bench-")
        ports = [(free_port(), free_port()) for _ in range(members)]
        initial = ",".join(f"e{i}=http://127.0.0.1:{peer}" for i, (_, peer) in enumerate(ports))
        self.clients = [f"127.0.0.1:{client}" for client, _ in ports]
        self.procs = []
        for i, (client, peer) in enumerate(ports):
            self.procs.append(subprocess.Popen(
                [ETCD, f"--name=e{i}", f"--data-dir={self.dir}/e{i}",
                 f"--listen-client-urls=http://127.0.0.1:{client}",
                 f"--advertise-client-urls=http://127.0.0.1:{client}",
                 f"--listen-peer-urls=http://127.0.0.1:{peer}",
                 f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                 f"--initial-cluster={initial}", "--log-level=error", "--logger=zap",
                 "--quota-backend-bytes=8589934592"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + 60
        while subprocess.run([ETCDCTL, f"--endpoints={','.join(self.clients)}", "endpoint",
                              "health", "--cluster"], env=dict(os.environ, ETCDCTL_API="3"),
                             capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError("the etcd cluster did not become healthy within 60 s")
            time.sleep(0.2)

    def peak_rss_mib(self):
        return max(proc_status(p.pid, "VmHWM") for p in self.procs) / 1024

    def close(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--agents", type=int, nargs="+", default=[100, 1000, 4000])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    if not os.path.exists(ETCD):
        sys.exit(f"{ETCD} is missing: scripts/install-deps.sh installs etcd-server")
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results = []
    for agents in args.agents:
        for run in range(args.runs):
            c10d = run_loadgen(args.build, master_cmd(args.build), agents, 64, "in-place")
            etcd = EtcdCluster()
            try:
                on_etcd = run_loadgen(args.build, master_cmd(args.build), agents, 64, "in-place",
                                      (f"--etcd={','.join(etcd.clients)}",))
                on_etcd["etcd_peak_rss_mib"] = round(etcd.peak_rss_mib(), 1)
            finally:
                etcd.close()
            results.append({"agents": agents, "run": run, "c10d": c10d, "etcd": on_etcd})
            for name, r in (("c10d", c10d), ("etcd-v3", on_etcd)):
                if "error" in r:
                    print(f"{agents:>6} {name:8} error: {r['error']}")
                    continue
                e = r.get("etcd") or {}
                restarts = "/".join(f"{ms:.0f}" for ms in r["restart_ms"])
                print(f"{agents:>6} {name:8} election {e.get('campaign_ms', 0):8.1f} ms"
                      f"  watches {e.get('watch_ms', 0):7.1f} ms  round {r['round_ms']:7.1f} ms"
                      f"  restarts {restarts} ms"
                      + (f"  etcd RSS {r['etcd_peak_rss_mib']} MiB" if 'etcd_peak_rss_mib' in r else ""))
    write_json(args.json, results)


if __name__ == "__main__":
    main()
