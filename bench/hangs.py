#!/usr/bin/env python3
"""How fast ddprun sees a hang and records where every rank was (docs/hangs.md).

  timer:   one agent, 2 Python workers (torch 1.13), rank 1 waits forever inside
           timer.expires(after=1) with torch's FileTimerClient: from the timer's expiration
           to the hung worker's exit (its traceback printed first).
  dstate:  one agent, a worker waiting in uninterruptible sleep (a vfork child that never
           execs), --uninterruptible-state-timeout=1: how long past the timeout the agent
           says the node is unhealthy.
  report:  N agents (2 and 4, loopback, one Python worker each in a gloo process group), the
           last rank stops beating (--worker-heartbeat-timeout=3): from the hang being
           declared to the last agent printing the merged report of every rank.

Figures come from the agents' own log timestamps (LOGLEVEL=DEBUG).

  bench/hangs.py --ddprun build/launcher/ddprun --test-worker build/tests/integration/test_worker
"""
import argparse
import datetime
import os
import re
import shutil
import subprocess
import tempfile

from procs import free_port
from report import summarize, write_json

PYTHON = "/usr/bin/python3"
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "compat",
                   "hang_job.py")
STAMP = re.compile(r"^\[ddprun\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) ")


def stamp(line):
    m = STAMP.match(line)
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f") if m else None


def first(lines, needle):
    for line in lines:
        if needle in line and stamp(line):
            return line
    raise RuntimeError(f"no line with {needle!r}:\n" + "\n".join(lines[-30:]))


def run(cmds, env_extra=None, timeout=120):
    env = dict(os.environ, PYTHON_EXEC=PYTHON, LOGLEVEL="DEBUG", OMP_NUM_THREADS="1",
               **(env_extra or {}))
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for c in cmds]
    return [p.communicate(timeout=timeout)[1].splitlines() for p in procs]


def timer_ms():
    logs = tempfile.mkdtemp(prefix="ddprun-bench-")
    try:
        (lines,) = run([[ARGS.ddprun, "--nproc-per-node=2", f"--log-dir={logs}", JOB, "timer", "1",
                         logs]],
                       {"TORCHELASTIC_ENABLE_FILE_TIMER": "1"})
    finally:
        shutil.rmtree(logs)
    expired = first(lines, "FileTimer scope 'training_step' expired at ")
    deadline = datetime.datetime.strptime(
        re.search(r"expired at (\S+ \S+)", expired).group(1), "%Y-%m-%d %H:%M:%S.%f")
    ended = first(lines, "local_rank 1 pid ")
    return (stamp(ended) - deadline).total_seconds() * 1000


def dstate_ms():
    (lines,) = run([[ARGS.ddprun, "--nproc-per-node=1", "--no-python",
                     "--uninterruptible-state-timeout=1", ARGS.test_worker, "vfork-wait"]])
    said = first(lines, "has been in uninterruptible sleep for ")
    dwell = re.search(r"sleep for ([\d.]+)(m?s)", said)
    seconds = float(dwell.group(1)) / (1000 if dwell.group(2) == "ms" else 1)
    return (seconds - 1) * 1000


def report_ms(agents):
    port = free_port()
    logs = tempfile.mkdtemp(prefix="ddprun-bench-")
    cmds = []
    # Agents on one machine: --local-addr gives each a name of its own in the report. The
    # case without it runs across network namespaces (DdpAcrossHosts.AHungRank...).
    for node in range(1, agents + 1):
        cmds.append([ARGS.ddprun, f"--nnodes={agents}", "--nproc-per-node=1",
                     "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                     "--rdzv-id=bench", f"--local-addr=127.0.0.{node}",
                     *([] if node == 1 else ["--rdzv-conf=is_host=0"]),
                     "--worker-heartbeat-timeout=3", f"--log-dir={logs}/{node}",
                     JOB, "collective", str(agents - 1)])
    try:
        all_lines = run(cmds)
    finally:
        shutil.rmtree(logs)
    # c10d places nodes by arrival: the hung rank's agent is any of them.
    declared = min((stamp(line) for lines in all_lines for line in lines
                    if "taken for hung; recording where every worker is" in line and stamp(line)),
                   default=None)
    if declared is None:
        raise RuntimeError("no agent declared the hang:\n" + "\n".join(all_lines[0][-30:]))
    printed = max(stamp(first(lines, " warning: hang report (round 0)")) for lines in all_lines)
    return (printed - declared).total_seconds() * 1000


def main():
    results = {}
    measures = [("timer expiry -> hung worker ended (ms)", timer_ms),
                ("uninterruptible sleep: reported past the timeout (ms)", dstate_ms),
                ("hang declared -> every agent has the report, 2 agents (ms)", lambda: report_ms(2)),
                ("hang declared -> every agent has the report, 4 agents (ms)", lambda: report_ms(4))]
    for name, measure in measures:
        results[name] = summarize([measure() for _ in range(ARGS.runs)])
        s = results[name]
        print(f"{name:62s} min {s['min']:7.1f}  median {s['median']:7.1f}  max {s['max']:7.1f}")
    if ARGS.json:
        write_json(ARGS.json, {"ddprun": results})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ddprun", default="build/launcher/ddprun")
    parser.add_argument("--test-worker", default="build/tests/integration/test_worker")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json")
    ARGS = parser.parse_args()
    ARGS.ddprun = os.path.abspath(ARGS.ddprun)
    ARGS.test_worker = os.path.abspath(ARGS.test_worker)
    main()
