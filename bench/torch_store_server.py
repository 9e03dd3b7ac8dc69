#!/usr/bin/env python3
"""torch's own TCPStore server, made as torchrun's c10d rendezvous backend makes it
(`TCPStore(host, port, is_master=True, multi_tenant=True, timeout=...)`), for
bench/store_scale.py to load. Prints the port, then the backend that serves ("libuv" or
"legacy"), and serves until SIGTERM.

torch picks its libuv server by default (2.4+). Builds without libuv refuse that, and then
this asks for the legacy server, as `USE_LIBUV=0` would, and says so: Debian's torch
packages are built without libuv.

  python3 bench/torch_store_server.py [PORT]
"""
import datetime
import signal
import sys

from torch.distributed import TCPStore


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    timeout = datetime.timedelta(seconds=900)
    try:
        store = TCPStore("127.0.0.1", port, is_master=True, multi_tenant=True, timeout=timeout,
                         wait_for_workers=False)
        backend = "libuv" if store.libuvBackend else "legacy"
    except RuntimeError as error:
        if "libuv" not in str(error):
            raise
        store = TCPStore("127.0.0.1", port, is_master=True, multi_tenant=True, timeout=timeout,
                         wait_for_workers=False, use_libuv=False)
        backend = "legacy"
    print(store.port, flush=True)
    print(backend, flush=True)
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    signal.sigwait(stop)


if __name__ == "__main__":
    main()
