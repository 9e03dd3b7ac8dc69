"""The job bench/torch_restart.py crashes: a real PyTorch DDP job (gloo, a Linear layer),
with the wall-clock time of each step of a worker's start written to
<out>/times.<attempt>.<rank>: its first line, `import torch` done, init_process_group done,
the first all-reduce (DDP's first backward) done. In the first attempt, once every rank is
past a few steps, rank <crash_rank> writes <out>/crash and exits 1; the others wait to be
stopped. The second attempt passes a barrier and ends.

The attempt is 1 once <out>/crash exists, not TORCHELASTIC_RESTART_COUNT: torchrun 1.13's
nodes disagree on that count after a crash on one of them (the other restarts for a "new
node" and spends no restart), and a job that trusted it would wait forever.

  restart_job.py OUT CRASH_RANK
"""
import time

first_line = time.time()

import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

imported = time.time()


def main():
    out, crash_rank = sys.argv[1], int(sys.argv[2])
    rank = int(os.environ["RANK"])
    attempt = "1" if os.path.exists(os.path.join(out, "crash")) else "0"
    dist.init_process_group("gloo", init_method="env://")
    grouped = time.time()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64))
    batch = torch.randn(32, 64)
    model(batch).sum().backward()
    reduced = time.time()
    with open(os.path.join(out, f"times.{attempt}.{rank}"), "w") as f:
        f.write(f"{first_line} {imported} {grouped} {reduced}\n")
    for _ in range(3):
        model(batch).sum().backward()
    dist.barrier()
    if attempt != "0":
        return
    if rank == crash_rank:
        with open(os.path.join(out, "crash"), "w") as f:
            f.write(f"{time.time()}\n")
        os._exit(1)
    time.sleep(600)  # stopped by the launcher


if __name__ == "__main__":
    main()
