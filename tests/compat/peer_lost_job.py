"""A gloo job in which rank 0 raises once the process group is up, and the others, in an
all_reduce that waits for it, die of gloo's "Connection closed by peer" when its process
goes: whichever the launcher sees end first, rank 0 is the root cause (failure_summary.h).
"""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
if dist.get_rank() == 0:
    raise ValueError("bad batch at step 7")
dist.all_reduce(torch.ones(1))
