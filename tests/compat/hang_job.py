# A job with one hung rank, for ddprun's hang tests (tests/compat/hang_compat_test.cc).
#   hang_job.py timer RANK DIR RANK waits forever inside timer.expires(after=1, scope=...),
#                              armed once every other rank has imported torch and said so
#                              in DIR (ready.<rank>): the report must find them waiting
#   hang_job.py heartbeat RANK every rank beats on DDPRUN_HEARTBEAT_FD; RANK beats once,
#                              then hangs
#   hang_job.py collective RANK  every rank beats once torch is imported (a thread cannot
#                              beat while `import torch` holds the GIL: the agent's startup
#                              bound covers the import); in a gloo process group, RANK stops
#                              beating and hangs before an all_reduce that the others then
#                              wait in
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
    ready = sys.argv[3]
    open(os.path.join(ready, f"ready.{rank}"), "w").close()
    if rank == hung_rank:
        # The others may still be importing torch on a busy machine: the 1 s timer starts
        # once they wait for their peers, so that the report finds them there.
        others = [os.path.join(ready, f"ready.{r}")
                  for r in range(int(os.environ["WORLD_SIZE"])) if r != rank]
        while not all(os.path.exists(p) for p in others):
            time.sleep(0.01)
        with timer.expires(after=1, scope="training_step"):
            hang_in_named_function()
elif mode == "heartbeat":
    fd = int(os.environ["DDPRUN_HEARTBEAT_FD"])
    if rank == hung_rank:
        os.write(fd, b".")  # it ran, then hung: the heartbeat timeout counts from here
        hang_in_named_function()
    threading.Thread(target=beat_forever, args=(fd,), daemon=True).start()
elif mode == "collective":
    import torch
    import torch.distributed as dist

    threading.Thread(target=beat_forever, args=(int(os.environ["DDPRUN_HEARTBEAT_FD"]),),
                     daemon=True).start()
    dist.init_process_group("gloo")
    if rank == hung_rank:
        beating = False
        hang_in_named_function()
    dist.all_reduce(torch.ones(1))
wait_for_peers()
