# A job with one hung rank, for ddprun's hang tests (tests/compat/hang_compat_test.cc).
#   hang_job.py timer RANK     RANK waits forever inside timer.expires(after=1, scope=...)
#   hang_job.py heartbeat RANK every rank beats on DDPRUN_HEARTBEAT_FD; RANK stops and hangs
#   hang_job.py collective RANK  every rank beats from its start; in a gloo process group,
#                              RANK stops beating and hangs before an all_reduce that the
#                              others then wait in
# In the first two modes the other ranks wait in wait_for_peers().
import os
import sys
import threading
import time


def hang_in_named_function():
    threading.Event().wait()


def wait_for_peers():
    while True:
        time.sleep(0.05)


beating = True


def beat_forever(fd):
    while beating:
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
elif mode == "collective":
    # Beats from the start: importing torch on a busy machine takes longer than the timeout.
    threading.Thread(target=beat_forever, args=(int(os.environ["DDPRUN_HEARTBEAT_FD"]),),
                     daemon=True).start()
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    if rank == hung_rank:
        beating = False
        hang_in_named_function()
    dist.all_reduce(torch.ones(1))
wait_for_peers()
