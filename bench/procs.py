"""What the benchmark scripts share about processes: files workers write, ports, /proc."""
import json
import os
import signal
import socket
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHRUN_SHIM = os.path.join(HERE, "..", "tests", "compat", "torchrun_py311.py")
TORCH_PYTHON = "/usr/bin/python3"


def torch_available():
    return os.path.exists(TORCH_PYTHON) and subprocess.run(
        [TORCH_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


def torchrun_cmd(monitor_interval, opts):
    """torchrun 1.13 through the Python 3.11 shim; `opts` in torch 1.13's underscore spelling."""
    return [TORCH_PYTHON, TORCHRUN_SHIM, f"--monitor_interval={monitor_interval}", *opts]


def read_ns(path):
    with open(path) as f:
        return int(f.read())


def time_launch(command, nproc, work):
    """Runs `command` (a launcher whose bench_worker writes `work`/start.<rank>.0), with
    OMP_NUM_THREADS=1; returns (ms from start to the last worker running, ms of the whole job)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.time_ns()
    proc = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t_end = time.time_ns()
    if proc.returncode != 0:
        raise RuntimeError(f"{command[0]} exited {proc.returncode}: {proc.stderr[-500:]}")
    starts = [read_ns(f"{work}/start.{r}.0") for r in range(nproc)]
    return (max(starts) - t0) / 1e6, (t_end - t0) / 1e6


def time_restart(command, nproc, work, name):
    """Runs `command` (a launcher with --max-restarts=1 whose bench_worker's rank 1 crashes
    once, in crash-once mode); returns ms from the crash to the last replacement running."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} exited {proc.returncode}: {proc.stderr[-500:]}")
    crash = read_ns(f"{work}/crash")
    return (max(read_ns(f"{work}/start.{r}.1") for r in range(nproc)) - crash) / 1e6


def wait_for(paths, timeout):
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(p) for p in paths):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout}s for {paths}")
        time.sleep(0.001)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid, field):
    """A numeric field of /proc/PID/status (VmHWM in KiB, Threads, ...)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def cpu_seconds(pid):
    """User + system CPU time the process has used (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pss_kib(pid):
    """Proportional set size: shared pages (libraries) divided among the processes using them."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise RuntimeError(f"no Pss for {pid}")


def wait_for_port(port, timeout):
    """Until something listens on 127.0.0.1:`port`."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")
        time.sleep(0.005)


def launcher_parser(doc):
    """The options every launcher benchmark takes; add its own, then parse_launcher_args."""
    import argparse
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ddprun", default="build/launcher/ddprun")
    parser.add_argument("--ddprun-portable", metavar="PATH",
                        help="a portable ddprun (scripts/release.sh: the tarball's bin/ddprun), "
                             "measured beside --ddprun in the same run as 'ddprun-portable'")
    parser.add_argument("--worker", default="build/bench/bench_worker")
    parser.add_argument("--no-torchrun", action="store_true")
    parser.add_argument("--json")
    return parser


def parse_launcher_args(parser):
    args = parser.parse_args()
    args.ddprun = os.path.abspath(args.ddprun)
    args.worker = os.path.abspath(args.worker)
    # Each ddprun measured, by the name its results go under.
    args.ddpruns = {"ddprun": args.ddprun}
    if args.ddprun_portable:
        args.ddpruns["ddprun-portable"] = os.path.abspath(args.ddprun_portable)
    return args


def master_cmd(build):
    """ddprun-master of the build in `build`, listening on loopback only."""
    return [os.path.join(build, "master", "ddprun-master"), "--host=127.0.0.1"]


def start_server(cmd, port):
    """Starts a master (`cmd` --port=`port`) in its own session; returns once it listens."""
    proc = subprocess.Popen([*cmd, f"--port={port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port, 30)
    except TimeoutError:
        os.killpg(proc.pid, signal.SIGKILL)  # never left behind
        proc.wait()
        raise
    return proc


def run_loadgen(build, master_cmd, agents, connections, restart_path, extra=(), master_extra=()):
    """A fresh master (`master_cmd` `master_extra` on a fresh loopback port) against
    ddprun-loadgen with `agents` agents: its JSON, or {"error": its last line}."""
    port = free_port()
    try:
        master = start_server([*master_cmd, *master_extra], port)
    except TimeoutError as e:  # this cell's error, not the whole run's
        return {"error": f"{master_cmd[0]}: {e}"}
    try:
        out = subprocess.run(
            [os.path.join(build, "bench", "ddprun-loadgen"), f"--endpoint=127.0.0.1:{port}",
             f"--agents={agents}", f"--connections={connections}", "--restarts=3",
             f"--master-pid={master.pid}", "--timeout=120", f"--restart-path={restart_path}",
             *extra],
            capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else
                    f"exit {out.returncode}"}
        return json.loads(out.stdout)
    finally:
        try:
            os.killpg(master.pid, signal.SIGTERM)
        except ProcessLookupError:  # --restart-master killed it (and ends the new one itself)
            pass
        try:
            master.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(master.pid, signal.SIGKILL)
            master.wait()
