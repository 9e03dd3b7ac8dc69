"""PyTorch's own TCPStore client against a store at HOST:PORT (the agent's, in ddprun).

  tcpstore_client.py sweep HOST PORT     every public TCPStore method, checked
  tcpstore_client.py intrude HOST PORT
      an outsider's client: lists the keys, reads rank 0's address key and sets the
      barrier's; prints "refused: ..." and exits 0 when the store closes the connection,
      exits 1 when it answers
  tcpstore_client.py pg HOST PORT RANK WORLD OUT
      one worker of a gloo process group under an agent store (TORCHELASTIC_USE_AGENT_STORE=True),
      as torchrun's workers create it: all_reduce, new_group, barrier; writes OUT/pg.RANK
Exits non-zero with the reason on the first thing that is not as PyTorch's own server does it.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def expect(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")


def connect(host, port, timeout):
    """A client, as torch 2.x's init_process_group makes one; Debian's torch 2.x is built
    without libuv, whose client refuses only the queue verbs (the bytes are the same)."""
    try:
        return dist.TCPStore(host, port, None, False, timeout, use_libuv=False)
    except TypeError:  # torch 1.13 has no use_libuv
        return dist.TCPStore(host, port, None, False, timeout)


def sweep(host, port):
    timeout = datetime.timedelta(seconds=10)
    store = connect(host, port, timeout)
    other = connect(host, port, timeout)
    store.set("k", "v1")
    expect("get", other.get("k"), b"v1")
    store.set("bytes", b"\x00\xff\x00")
    expect("binary value", other.get("bytes"), b"\x00\xff\x00")
    expect("add from absent", store.add("n", 5), 5)
    expect("add", other.add("n", -2), 3)
    expect("compare_set miss", store.compare_set("cs", "x", "y"), b"x")
    expect("compare_set create", store.compare_set("cs", "", "first"), b"first")
    expect("compare_set mismatch", store.compare_set("cs", "no", "z"), b"first")
    expect("compare_set swap", store.compare_set("cs", "first", "second"), b"second")
    store.wait(["k", "n"])
    store.wait(["k"], datetime.timedelta(seconds=1))
    keys_before = store.num_keys()
    expect("delete_key", store.delete_key("cs"), True)
    expect("delete_key absent", store.delete_key("cs"), False)
    expect("num_keys after delete", store.num_keys(), keys_before - 1)
    # A wait that times out raises, as with PyTorch's own server (2.x: after CANCEL_WAIT,
    # and the connection stays usable).
    store.set_timeout(datetime.timedelta(seconds=1))
    try:
        store.get("never")
        sys.exit("get of a key nobody sets returned")
    except RuntimeError as e:
        if "timeout" not in str(e).lower():
            sys.exit(f"get of a missing key raised something else: {e}")
    if hasattr(store, "check"):
        expect("the connection after a timed-out wait", store.get("k"), b"v1")
    # A blocking get released by another client.
    fresh = connect(host, port, timeout)
    import threading
    threading.Timer(0.3, lambda: other.set("late", "here")).start()
    expect("get released by a set", fresh.get("late"), b"here")
    tried = ["set", "get", "add", "compare_set", "wait", "num_keys", "delete_key", "set_timeout"]
    if hasattr(store, "check"):  # torch 2.x
        expect("check present", store.check(["k", "n"]), True)
        expect("check absent", store.check(["k", "absent"]), False)
        store.append("log", "ab")
        store.append("log", "cd")
        expect("append", other.get("log"), b"abcd")
        store.multi_set(["m1", "m2"], ["1", "22"])
        expect("multi_get", other.multi_get(["m2", "m1", "log"]), [b"22", b"1", b"abcd"])
        tried += ["check", "append", "multi_get", "multi_set"]
    if hasattr(store, "list_keys"):
        keys = store.list_keys()
        for key in ("k", "n", "log", "m1"):
            if key not in keys:
                sys.exit(f"list_keys: {key} missing from {keys}")
        tried.append("list_keys")
    if hasattr(store, "barrier"):
        threading.Timer(0.3, lambda: other.barrier("bar", 2)).start()
        store.barrier("bar", 2)
        tried.append("barrier")
    if getattr(store, "libuvBackend", False) and hasattr(store, "queue_push"):
        store.queue_push("q", "job")
        expect("queue_len", other.queue_len("q"), 1)
        expect("queue_pop", other.queue_pop("q"), b"job")
        tried.append("queue_*")
    public = [m for m in dir(store) if not m.startswith("_") and callable(getattr(store, m))]
    print(f"sweep ok (torch {torch.__version__}): {', '.join(tried)}; "
          f"client methods: {', '.join(public)}")


def pg(host, port, rank, world, out):
    os.environ.update(MASTER_ADDR=host, MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), TORCHELASTIC_USE_AGENT_STORE="True",
                      TORCHELASTIC_RESTART_COUNT="0")
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    group = dist.new_group([0, 1])
    dist.barrier(group)
    dist.barrier()
    with open(os.path.join(out, f"pg.{rank}"), "w") as f:
        f.write(f"{t.item()}\n")
    dist.destroy_process_group()


def intrude(host, port):
    try:
        store = connect(host, port, datetime.timedelta(seconds=10))
        got = store.num_keys()
        store.set("/intruder", "released")
    except Exception as e:  # noqa: BLE001: any failure is the store refusing
        print(f"refused: {type(e).__name__}: {e}")
        return
    sys.exit(f"the store answered an outsider: {got} keys, and a set")


if __name__ == "__main__":
    if sys.argv[1] == "sweep":
        sweep(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "intrude":
        intrude(sys.argv[2], int(sys.argv[3]))
    else:
        pg(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
