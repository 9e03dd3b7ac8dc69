# A gloo job whose rank 1 exits 3 after attempt 0's first all-reduce (its peers then fail on
# the lost peer). Attempt 1's ranks write running.<rank> into argv[1] and end once the test
# writes argv[1]/go: the test reads the agents' metrics in between.
import os
import sys
import time

import torch
import torch.distributed as dist

out = sys.argv[1]
dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    if dist.get_rank() == 1:
        sys.exit(3)
    dist.barrier()  # raises: rank 1 is gone
else:
    open(os.path.join(out, f"running.{dist.get_rank()}"), "w").close()
    while not os.path.exists(os.path.join(out, "go")):
        time.sleep(0.05)
