"""Workers that start processes of their own: a DataLoader with two workers under the fork
and the spawn start methods, and torch.multiprocessing.spawn. Writes <out_dir>/jobs.<RANK>
with what they computed, which must not depend on how ddprun made the worker (--preload)."""
import os
import sys

import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor([i * i + int(os.environ["RANK"])], dtype=torch.float64)


def loader_sum(context):
    loader = DataLoader(Squares(), batch_size=2, num_workers=2, multiprocessing_context=context)
    return sum(batch.sum().item() for batch in loader)


def child(index, out_dir, rank):
    with open(os.path.join(out_dir, f"spawned.{rank}.{index}"), "w") as out:
        out.write(f"{index}:{os.environ['RANK']}:{torch.ones(3).sum().item()}:{__name__}")


def main():
    out_dir = sys.argv[1]
    rank = os.environ["RANK"]
    fork_sum = loader_sum("fork")
    spawn_sum = loader_sum("spawn")
    mp.spawn(child, args=(out_dir, rank), nprocs=2)
    spawned = [open(os.path.join(out_dir, f"spawned.{rank}.{i}")).read() for i in range(2)]
    with open(os.path.join(out_dir, f"jobs.{rank}"), "w") as out:
        out.write(f"fork={fork_sum}\nspawn={spawn_sum}\nspawned={' '.join(spawned)}\n")
    print(f"jobs rank {rank} done")


if __name__ == "__main__":
    main()
