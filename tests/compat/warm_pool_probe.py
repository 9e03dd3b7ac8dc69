"""What a worker process is, as key=value lines in <out_dir>/probe.<RANK>: every fact that
must be the same whether ddprun started the worker or forked it from its warm pool
(--preload). Run as a script or with -m; extra arguments are only echoed (sys.argv)."""
import ctypes
import os
import random
import resource
import signal
import sys

import torch


def fd_kinds():
    # The heartbeat pipe by name: its number is the agent's, which has one more descriptor
    # open (the pool's socket) when it hands out a warm pool's workers.
    heartbeat = int(os.environ.get("DDPRUN_HEARTBEAT_FD", "-1"))
    kinds = []
    for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the folder's own descriptor, gone
        kind = target.split(":")[0] if ":" in target else "file"
        inheritable = os.get_inheritable(fd)
        name = "heartbeat" if fd == heartbeat else str(fd)
        kinds.append(f"{name}:{kind}:{'inherit' if inheritable else 'cloexec'}")
    return " ".join(kinds)


def parent_death_signal():
    libc = ctypes.CDLL(None)
    value = ctypes.c_int(0)
    libc.prctl(2, ctypes.byref(value))  # PR_GET_PDEATHSIG
    return value.value


def main():
    out_dir = sys.argv[1]
    rank = os.environ["RANK"]
    main_module = sys.modules["__main__"]
    with open(f"/proc/{os.getppid()}/comm") as comm:
        parent = comm.read().strip()
    with open("/proc/self/cmdline", "rb") as f:
        cmdline = f.read().rstrip(b"\0").split(b"\0")
    facts = {
        # Without the output folder, which differs between the runs compared.
        "argv": [os.path.basename(sys.argv[0])] + sys.argv[2:],
        "orig_argv": [os.path.basename(a) for a in sys.orig_argv if a != out_dir],
        "cmdline": [os.path.basename(a.decode()) for a in cmdline if a.decode() != out_dir],
        "path0": sys.path[0],
        "path_len": len(sys.path),
        "file": __file__,
        "name": __name__,
        "spec": getattr(__spec__, "name", None),
        "loader": type(__loader__).__name__,
        "package": __package__,
        "cached": __cached__ is not None,
        "main_is_this": main_module.__dict__ is globals(),
        "main_keys": sorted(k for k in vars(main_module) if k.startswith("__")),
        "builtins": type(__builtins__).__name__,
        "parent": parent,
        "own_group": os.getpgid(0) == os.getpid(),
        "own_session": os.getsid(0) == os.getpid(),
        "parent_death_signal": parent_death_signal(),
        "fds": fd_kinds(),
        "sigmask": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "handlers": sorted(f"{s.name}={signal.getsignal(s)}" for s in signal.Signals
                           if s not in (signal.SIGKILL, signal.SIGSTOP)),
        "cwd": os.getcwd(),
        "threads": len(os.listdir("/proc/self/task")),
        "affinity": sorted(os.sched_getaffinity(0)),
        "cgroup": open("/proc/self/cgroup").read().strip().rsplit("/", 1)[-1].startswith("ddprun-"),
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
        "umask": os.umask(0o022),
        "flags": repr(sys.flags),
        "environ_keys": sorted(os.environ),
        "environ_rank": os.environ["RANK"] + "/" + os.environ["LOCAL_RANK"],
        "stdout_tty": os.isatty(1),
    }
    getenv = ctypes.CDLL(None).getenv  # the C library's copy: what native code reads
    getenv.restype = ctypes.c_char_p
    facts["c_environ_rank"] = getenv(b"RANK").decode()
    with open(os.path.join(out_dir, f"probe.{rank}"), "w") as out:
        for key, value in facts.items():
            out.write(f"{key}={value}\n")
    # Differs per process in a fresh start; must in a forked one too.
    with open(os.path.join(out_dir, f"random.{rank}"), "w") as out:
        out.write(f"{random.random()} {torch.initial_seed()} {torch.rand(1).item()}\n")
    print(f"probe rank {rank} on stdout")
    print(f"probe rank {rank} on stderr", file=sys.stderr)


if __name__ == "__main__":
    main()
