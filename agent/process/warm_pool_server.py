# The warm pool's interpreter (docs/warm-restart.md): one Python per node that has imported
# the modules of --preload and nothing more, and forks each worker from there.
#
# The agent starts it as `python -u -c BOOTSTRAP ddprun-warm-pool FD SPEC MODULES PADDING`
# (warm_pool.cc) and sends this file as the first message on FD, a SOCK_SEQPACKET socket.
# Messages are fields joined by NUL; file descriptors travel as SCM_RIGHTS.
#   agent -> here: "fork", ...   (see fork_request)      here -> agent: "pid", PID, MEMPOLICY_ERRNO
#                                                                        | "error", CALL, ERRNO, TEXT
#                                                                        | "refused", WHY
#   agent -> here: "check"                               here -> agent: "fresh" | "stale", PATH
#   here -> agent, once after the imports: "ready", SECONDS | "failed", WHY
# serve() returns only in a forked worker: the code of its __main__ and the globals to run it
# in. BOOTSTRAP runs it, at the bottom of the stack (a live stack shows one frame, <string>,
# below the user's), then calls end(), which ends the process as Python's exit would.
#
# A worker is forked twice (here -> helper -> worker) and the helper exits at once, so the
# worker is re-parented to the agent, a child subreaper: the agent reaps it and gets its exit
# status as for a worker it started itself.

import os
import sys
import socket
import ctypes
import types
import importlib
import importlib.machinery
import time

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
_SYS_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237, "ppc64le": 261}.get(os.uname().machine)
MPOL_PREFERRED = 1


def send(sock, *fields):
    sock.send(b"\0".join(str(f).encode("utf-8", "surrogateescape") for f in fields))


def unsafe_to_fork():
    """Why a fork now would give a worker broken state; None when it would not."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        return (f"the preloaded interpreter has {threads} threads (a preloaded module started "
                "one at import; a forked child would have only the forking one, and any lock "
                "another held)")
    with open("/proc/self/maps") as maps:
        if any("libcuda.so" in line for line in maps):
            return ("libcuda.so is loaded in the preloaded interpreter (a preloaded module "
                    "reached for the GPU driver: a forked child cannot use a driver its parent "
                    "opened)")
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(("/dev/nvidia", "/dev/infiniband/")):
            return (f"the preloaded interpreter has {target} open (a preloaded module opened "
                    "the GPU or the RDMA network: a forked child cannot use them)")
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and getattr(cuda, "is_initialized", lambda: False)():
        return "a preloaded module initialised CUDA (torch.cuda.is_initialized())"
    return None


def open_sockets(sock):
    """{fd: "socket:[inode]"} for each socket this interpreter holds but the agent's (`sock`)
    and its standard streams (a socket under systemd's journal)."""
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        if int(fd) <= 2 or int(fd) == sock.fileno():
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found[int(fd)] = target
    return found


def opened_socket(name, sockets):
    # A socket open at the fork is every worker's at once: two ranks write into one connection
    # (their bytes interleave), or read each other's answers.
    listed = ", ".join(f"fd {fd}: {target}" for fd, target in sorted(sockets.items()))
    return (f"import {name} left a socket open ({listed}); a forked worker would share it with "
            "every other worker: open connections in the worker (after the import), or leave "
            "the module out of --preload")


def module_files():
    files = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            try:
                st = os.stat(path)
                files[path] = (st.st_mtime_ns, st.st_size)
            except OSError:
                pass
    return files


def first_changed(files):
    for path, seen in files.items():
        try:
            st = os.stat(path)
        except OSError:
            return path
        if (st.st_mtime_ns, st.st_size) != seen:
            return path
    return None


# Python's -P / PYTHONSAFEPATH (3.11+): a started worker gets no first entry of its own then.
SAFE_PATH = bool(getattr(sys.flags, "safe_path", False))


def worker_path0(kind, target):
    # What `python x.py` puts first on sys.path (the script's folder, links resolved), and
    # what `python -m m` puts there (the working folder).
    if kind == "script":
        return os.path.dirname(os.path.realpath(target))
    return os.getcwd()


def parse_fork(fields):
    # "fork", CWD, AGENT_PID, INHERIT_FD, CPUS, NODE, FD_NAMES, ARGC, ARGV..., ENV...
    request = {"cwd": fields[1], "agent_pid": int(fields[2]), "inherit": int(fields[3]),
               "cpus": [int(c) for c in fields[4].split(",") if c], "node": int(fields[5]),
               "fd_names": [n for n in fields[6].split(",") if n]}
    argc = int(fields[7])
    request["argv"] = fields[8:8 + argc]
    request["env"] = dict(kv.split("=", 1) for kv in fields[8 + argc:] if "=" in kv)
    return request


def bind(request):
    """The helper binds itself; the worker inherits it. Returns set_mempolicy's errno."""
    if request["cpus"]:
        os.sched_setaffinity(0, request["cpus"])
    node = request["node"]
    if node < 0 or _SYS_SET_MEMPOLICY is None:
        return 0
    words = node // 64 + 1
    mask = (ctypes.c_ulong * words)()
    mask[node // 64] = 1 << (node % 64)
    if _libc.syscall(_SYS_SET_MEMPOLICY, MPOL_PREFERRED, mask, ctypes.c_ulong(words * 64 + 1)):
        return ctypes.get_errno()
    return 0


def place_fds(request, fds):
    """Standard streams and the heartbeat pipe at the numbers a started worker has them."""
    targets = {}
    if "stdout" in fds:
        targets[1] = fds.pop("stdout")
    if "stderr" in fds:
        targets[2] = fds.pop("stderr")
    if "inherit" in fds:
        targets[request["inherit"]] = fds.pop("inherit")
    # Out of the way of every target first, so that no dup2 closes a source still needed.
    low = max(targets, default=2) + 1
    moved = {}
    for target, fd in targets.items():
        moved[target] = os.dup(fd) if fd >= low else _dup_at_least(fd, low)
        os.close(fd)
    for target, fd in moved.items():
        os.dup2(fd, target, inheritable=True)
        os.close(fd)
    for fd in fds.values():
        os.close(fd)


def _dup_at_least(fd, low):
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD, low)


def become_worker(sock, request, fds, helper, grouped):
    """In the worker: everything a started worker has, then the code of its __main__."""
    os.setsid()
    guard = fds.pop("guard", None)
    if guard is not None:
        os.write(guard, b"+%d\n" % os.getpid())
        os.close(guard)
    os.write(grouped, b"1")
    os.close(grouped)
    sock.close()
    # The helper exits right after the fork; once it has, the agent is the parent, and the
    # parent-death signal can be armed against it (arming it before would fire on the
    # helper's exit).
    while os.getppid() == helper:
        os.sched_yield()
    _libc.prctl(PR_SET_PDEATHSIG, 9)
    if os.getppid() != request["agent_pid"]:
        os._exit(127)
    place_fds(request, fds)
    show_command_line(request["argv"])
    show_environment(request["env"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    reseed_generators()
    run_startup_hooks()
    return main_of(request["argv"])


def show_command_line(argv):
    """/proc/self/cmdline (what ps, pgrep -f and top show) becomes the worker's own, written
    over the pool's arguments, which the agent padded to leave room for it."""
    with open("/proc/self/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end
    text = b"\0".join(a.encode("utf-8", "surrogateescape") for a in argv) + b"\0"
    room = end - start
    if len(text) <= room:
        ctypes.memmove(start, text.ljust(room, b"\0"), room)


def show_environment(env):
    """/proc/self/environ (what `ps e` and tools that map pids to ranks read) gains the
    worker's own variables (RANK, LOCAL_RANK, ...), written over the room the agent left last
    in the pool's environment (DDPRUN_ENV_ROOM). The pool's own strings stay where they are:
    a library may hold a pointer to one."""
    with open("/proc/self/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])  # env_start, env_end
    with open("/proc/self/environ", "rb") as environ:
        area = environ.read()
    at = area.rfind(b"\0DDPRUN_ENV_ROOM=") + 1
    if at <= 0 or len(area) != end - start:
        return
    room_end = area.find(b"\0", at) + 1  # last, unless a wrapper (sh) reordered it
    if room_end <= 0:
        return
    kept = set(area[:at].split(b"\0")) | set(area[room_end:].split(b"\0"))
    added = b"".join(entry + b"\0" for entry in
                     (f"{k}={v}".encode("utf-8", "surrogateescape") for k, v in env.items())
                     if entry not in kept)
    room = room_end - at
    if len(added) <= room:
        ctypes.memmove(start + at, added.ljust(room, b"\0"), room)


def reseed_generators():
    # Seeded from the OS in a fresh process; a forked one would share the pool's state with
    # every other worker. Python's `random` reseeds itself after a fork. torch's CUDA
    # generators start from a fixed seed in a fresh process too, so they are left alone.
    # numpy's legacy generator is made (from the OS) when numpy.random is first imported:
    # only one the pool imported is shared; importing it here would load modules a started
    # worker does not have.
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "default_generator"):
        torch.default_generator.seed()


def run_startup_hooks():
    """sitecustomize and usercustomize, as a started interpreter's site runs them at its start,
    here with the worker's environment: a hook that seeds each rank from LOCAL_RANK, or reads
    RANK, sees its own. The pool ran them once at its own start, with the node's; a fresh
    import runs them again. (The import lines of .pth files are not run again.)"""
    if sys.flags.no_site or "site" not in sys.modules:
        return
    import site
    for name in ("sitecustomize", "usercustomize"):
        sys.modules.pop(name, None)
    # A started interpreter runs them before the script's folder is put first on sys.path: a
    # sitecustomize.py planted in that folder (it may be anyone's) is not one of them.
    path0 = sys.path.pop(0) if not SAFE_PATH and sys.path else None
    try:
        site.execsitecustomize()
        if site.ENABLE_USER_SITE:
            site.execusercustomize()
    finally:
        if path0 is not None:
            sys.path.insert(0, path0)


def main_of(argv):
    """What `python -u x.py args` or `python -u -m m args` would run, as (code, globals)."""
    sys.orig_argv = list(argv)
    rest = argv[2:]  # after the interpreter and -u
    main = types.ModuleType("__main__")
    if sys.version_info < (3, 14):  # 3.14's modules annotate lazily (PEP 649): no such key
        main.__annotations__ = {}
    main.__builtins__ = sys.modules["builtins"]
    sys.modules["__main__"] = main
    if rest[0] == "-m":
        sys.argv = ["-m"] + rest[2:]
        if not SAFE_PATH:
            sys.path[0] = worker_path0("module", rest[1])
        code = compile("__import__('runpy')._run_module_as_main(%r)" % rest[1],
                       "<ddprun warm pool>", "exec")
        return code, {}
    script = rest[0]
    sys.argv = list(rest)
    if not SAFE_PATH:
        sys.path[0] = worker_path0("script", script)
    path = os.path.abspath(script)
    main.__file__ = path
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    try:
        with open(script, "rb") as source:
            code = compile(source.read(), path, "exec")
    except OSError as e:
        # Python's own words and status for a script it cannot open.
        sys.stderr.write(f"{argv[0]}: can't open file {path!r}: [Errno {e.errno}] {e.strerror}\n")
        os._exit(2)
    return code, main.__dict__


def fork_worker(sock, request, fds):
    # The helper answers the agent itself, before it exits: its worker runs only once the
    # helper has exited (become_worker), so the agent has the worker's pid before the worker
    # does anything, even if this interpreter dies meanwhile. The helper then notes on a pipe
    # that it answered: the pool need not wait for it to exit (tearing its copy of the address
    # space down takes as long as the fork), and a helper that dies without answering is seen
    # (end of file), and said for it.
    answered_r, answered_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(answered_w)
        for fd in fds.values():
            os.close(fd)
        answered = os.read(answered_r, 1)
        os.close(answered_r)
        if not answered:
            _, status = os.waitpid(pid, 0)
            send(sock, "error", "fork", 0, f"the fork helper ended with status {status}")
        return None
    os.close(answered_r)

    def answer(*fields):
        try:
            send(sock, *fields)
        except OSError:
            os._exit(1)  # the agent is gone
        os.write(answered_w, b"1")
        os._exit(0)

    try:
        cgroup = fds.pop("cgroup", None)
        if cgroup is not None:
            try:
                os.write(cgroup, b"0")
            except OSError:
                pass  # as a started worker: outside the cgroup, the agent has said why
            os.close(cgroup)
        try:
            mempolicy_errno = bind(request)
        except OSError as e:
            answer("error", "sched_setaffinity", e.errno, e.strerror)
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda._is_in_bad_fork():
            answer("refused", "a forked child cannot use CUDA (torch.cuda._is_in_bad_fork())")
        helper = os.getpid()
        # The pid is answered once the worker leads its own process group, as a started
        # worker does when its start returns: a stop sent to the group at once must reach it.
        grouped_r, grouped_w = os.pipe()
        worker = os.fork()
    except BaseException as e:  # noqa: any failure here must reach the agent
        answer("error", "fork", getattr(e, "errno", 0) or 0, str(e))
    if worker:
        os.close(grouped_w)
        os.read(grouped_r, 1)  # or end of file: it died, and the agent reaps it
        answer("pid", worker, mempolicy_errno)
    os.close(answered_w)
    os.close(grouped_r)
    try:
        return become_worker(sock, request, fds, helper, grouped_w)
    except BaseException as e:
        os.write(2, f"ddprun warm pool: cannot become the worker: {e}\n".encode())
        os._exit(127)


def reap_helpers():
    """The helpers that have exited since (each exits right after its fork)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def serve():
    sock = socket.socket(fileno=int(sys.argv[2]))
    kind, target = sys.argv[3].split(":", 1)
    modules = [m for m in sys.argv[4].split(",") if m]
    # The bootstrap took the working folder off sys.path before anything was imported; the
    # preloaded modules are found where the worker's own imports would find them.
    if not SAFE_PATH:
        sys.path.insert(0, worker_path0(kind, target))
    began = time.monotonic()
    before = open_sockets(sock)  # none, unless the agent's own parent left one open to it
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as e:
            send(sock, "failed", f"import {name} raised {type(e).__name__}: {e}")
            os._exit(0)
        sockets = {fd: t for fd, t in open_sockets(sock).items() if before.get(fd) != t}
        if sockets:
            send(sock, "failed", opened_socket(name, sockets))
            os._exit(0)
    why = unsafe_to_fork()
    if why:
        send(sock, "failed", why)
        os._exit(0)
    files = module_files()
    send(sock, "ready", f"{time.monotonic() - began:.3f}", len(files))
    while True:
        reap_helpers()
        message, fds, _, _ = socket.recv_fds(sock, 4 << 20, 8)  # the agent's send buffer
        if not message:
            os._exit(0)  # the agent is gone
        fields = message.decode("utf-8", "surrogateescape").split("\0")
        if fields[0] == "check":
            changed = first_changed(files)
            send(sock, "stale", changed) if changed else send(sock, "fresh")
            continue
        request = parse_fork(fields)
        named = dict(zip(request["fd_names"], fds))
        why = unsafe_to_fork()
        if why:
            for fd in fds:
                os.close(fd)
            send(sock, "refused", why)
            continue
        worker = fork_worker(sock, request, named)
        if worker is not None:
            return worker


def end(error):
    """After the worker's __main__ (`error`: what it raised, or None), ends the process as
    Python's own exit would, in its order: the exit status (SystemExit's, or 1 after the
    traceback), non-daemon threads joined, atexit handlers, open files flushed. What it
    leaves out is the teardown of every module, which in a forked child writes to each page
    the interpreter shares with the pool's and so copies it (0.7 s for torch on a small
    machine, measured): a crashed rank would be seen that much later."""
    status = 0
    if isinstance(error, SystemExit):
        status = exit_status(error)
    elif error is not None:
        # The traceback as `python x.py` prints it: from the user's file down.
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in ("<string>", "<ddprun warm pool>"):
            tb = tb.tb_next
        error.__traceback__ = tb
        sys.excepthook(type(error), error, tb)
        status = 1
    try:
        import threading
        threading._shutdown()
    except BaseException:
        pass
    import atexit
    atexit._run_exitfuncs()
    status = flush_everything(status)
    if isinstance(error, KeyboardInterrupt):  # as Python does: end by the signal
        import signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(status)


def exit_status(e):
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except BaseException:
        pass
    return 1


def flush_everything(status):
    import gc
    import io
    for obj in gc.get_objects():
        # type(), not isinstance(): no attribute of an arbitrary object is read (some warn).
        if issubclass(type(obj), io.IOBase) and obj is not sys.stdout and obj is not sys.stderr:
            try:
                if not obj.closed:
                    obj.flush()
            except BaseException:
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:
            if stream is sys.stdout:
                status = 120  # Python's status when stdout cannot be flushed at exit
    return status
