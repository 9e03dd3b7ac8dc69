"""A real PyTorch DDP job (gloo, CPU, init_method env://, DistributedSampler), unchanged from
what one would run under torchrun. Writes <out_dir>/rank<RANK>.txt with the SHA-256 of the
final parameters and the full-dataset loss before and after training."""
import hashlib
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main(out_dir):
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])

    data = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=data)
    y = x @ torch.randn(8, 1, generator=data) + 0.01 * torch.randn(512, 1, generator=data)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)

    torch.manual_seed(1000 + rank)  # different on each rank: DDP must broadcast rank 0's
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.functional.mse_loss
    with torch.no_grad():
        loss_before = loss_fn(model.module(x), y).item()
    for epoch in range(8):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
    with torch.no_grad():
        loss_after = loss_fn(model.module(x), y).item()
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    digest = hashlib.sha256(params.numpy().tobytes()).hexdigest()
    with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as out:
        out.write(f"{digest} {loss_before} {loss_after}\n")
    print(f"rank {rank}: loss {loss_before:.4f} -> {loss_after:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
