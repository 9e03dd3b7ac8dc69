#!/usr/bin/env python3
"""What serving metrics and the status page costs the master (issue 18's closing figure).

A ddprun-master with --metrics-port, and ddprun-loadgen playing N agents against it: round 0,
one restart, then --hold seconds of heartbeats only, timing the master's CPU. Done twice: with
nobody scraping, and with a scrape of /metrics and a fetch of /api/v1/status every second
(Prometheus and one open status page). Prints one JSON line per case.

    bench/observability.py [--build build] [--agents 1000] [--hold 30] [--paths /metrics,...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

from procs import free_port, master_cmd


def scrape(port, paths, stop, counts):
    while not stop.wait(1.0):
        for path in paths:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                counts[path] = counts.get(path, 0) + 1
                counts[path + " bytes"] = len(r.read())


def run(args, scraped):
    port, metrics_port = free_port(), free_port()
    master = subprocess.Popen(
        [*master_cmd(args.build), f"--port={port}", f"--metrics-port={metrics_port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in master.stderr:
            if "status page on" in line:
                break
        # Its log goes on (a line per refused session, ...): read it, or it blocks writing.
        threading.Thread(target=master.stderr.read, daemon=True).start()
        stop, counts = threading.Event(), {}
        scraper = threading.Thread(target=scrape,
                                   args=(metrics_port, args.paths.split(","), stop, counts))
        if scraped:
            scraper.start()
        out = subprocess.run(
            [os.path.join(args.build, "bench", "ddprun-loadgen"), f"--endpoint=127.0.0.1:{port}",
             f"--agents={args.agents}", "--connections=64", "--restarts=1",
             f"--master-pid={master.pid}", f"--hold={args.hold}"],
            check=True, capture_output=True, text=True).stdout
        stop.set()
        if scraped:
            scraper.join()
        result = json.loads(out.strip().splitlines()[-1])
        status = open(f"/proc/{master.pid}/status").read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024
        return {"agents": args.agents, "scraped_every_second": scraped,
                "master_cpu_pct_held": result["master_cpu_pct_held"],
                "master_rss_mib": round(rss, 1),
                "master_peak_rss_mib": result["master_peak_rss_mib"],
                "scrapes": counts}
    finally:
        master.terminate()
        master.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=30)
    parser.add_argument("--paths", default="/metrics,/api/v1/status",
                        help="what is fetched every second, comma-separated")
    args = parser.parse_args()
    for scraped in (False, True):
        print(json.dumps(run(args, scraped)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
