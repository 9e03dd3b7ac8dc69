# A job with one hung rank, for ddprun's hang tests (tests/compat/hang_compat_test.cc).
#   hang_job.py timer RANK     RANK waits forever inside timer.expires(after=1, scope=...)
#   hang_job.py heartbeat RANK every rank beats on DDPRUN_HEARTBEAT_FD; RANK stops and hangs
# The other ranks wait in wait_for_peers(), as ranks blocked in a collective would.
import os
import sys
import threading
import time


def hang_in_named_function():
    threading.Event().wait()


def wait_for_peers():
    while True:
        time.sleep(0.05)


def beat_forever(fd):
    while True:
        os.write(fd, b".")
        time.sleep(0.05)


mode, hung_rank = sys.argv[1], int(sys.argv[2])
rank = int(os.environ["RANK"])
if mode == "timer":
    import torch.distributed.elastic.timer as timer

    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    if rank == hung_rank:
        with timer.expires(after=1, scope="training_step"):
            hang_in_named_function()
elif mode == "heartbeat":
    fd = int(os.environ["DDPRUN_HEARTBEAT_FD"])
    if rank == hung_rank:
        hang_in_named_function()
    threading.Thread(target=beat_forever, args=(fd,), daemon=True).start()
wait_for_peers()
