"""A real PyTorch DDP job (init_method env://, DistributedSampler), unchanged from what one
would run under torchrun: gloo on the CPU, or NCCL on GPU LOCAL_RANK with
device_ids=[LOCAL_RANK]. Writes <out_dir>/rank<RANK>.txt with the SHA-256 of the final
parameters and the full-dataset loss before and after training, <out_dir>/launch<RANK>.txt
with what the launcher told it (MASTER_ADDR and the rest) and the device it trained on, and
<out_dir>/meeting.<RANK> before init_process_group.

Training is deterministic: the same world size gives the same final parameters, whatever
happened before (a restarted attempt starts again from the start).

  --crash RANK:STEP   in the first attempt (TORCHELASTIC_RESTART_COUNT=0), RANK exits 3 at
                      training step STEP, as a crashing worker would
  --backend B         gloo (the default) or nccl
  --hold STEP         at training step STEP, every rank writes <out_dir>/held.<RANK> (its
                      pid) and waits until <out_dir>/go exists: a test disturbs the job there
  --world N           a smaller world only checks that it works (one all_reduce), writes
                      <out_dir>/ready.<WORLD_SIZE>.<RANK>, and waits to be stopped: the job
                      trains once N workers are in it
"""
import argparse
import hashlib
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

LAUNCH_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE",
                    "TORCHELASTIC_RESTART_COUNT", "GROUP_RANK", "WORLD_SIZE")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--crash", default="")
    parser.add_argument("--world", type=int, default=0)
    parser.add_argument("--hold", type=int, default=-1)
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    args = parser.parse_args()

    device = torch.device("cpu")
    if args.backend == "nccl":
        # Deterministic cuBLAS, so that a restarted job ends where an uncrashed one does.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)

    # Written before the workers meet: a test can tell workers that wait for each other.
    open(os.path.join(args.out_dir, f"meeting.{os.environ['RANK']}"), "w").close()
    dist.init_process_group(args.backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
    with open(os.path.join(args.out_dir, f"launch{rank}.txt"), "w") as out:
        for name in LAUNCH_VARIABLES:
            out.write(f"{name}={os.environ.get(name, '')}\n")
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        out.write(f"DEVICE={device} {name}\n")
        out.write(f"PID={os.getpid()}\n")

    if args.world and world < args.world:
        t = torch.ones(1, device=device)
        dist.all_reduce(t)
        assert t.item() == world
        open(os.path.join(args.out_dir, f"ready.{world}.{rank}"), "w").close()
        while True:
            time.sleep(1)  # until the job grows and this attempt is stopped

    crash_rank, crash_step = (int(v) for v in args.crash.split(":")) if args.crash else (-1, -1)
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"

    data = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=data)
    y = x @ torch.randn(8, 1, generator=data) + 0.01 * torch.randn(512, 1, generator=data)
    x, y = x.to(device), y.to(device)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)

    torch.manual_seed(1000 + rank)  # different on each rank: DDP must broadcast rank 0's
    model = torch.nn.Linear(8, 1).to(device)
    model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.functional.mse_loss
    with torch.no_grad():
        loss_before = loss_fn(model.module(x), y).item()
    step = 0
    for epoch in range(8):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            if step == args.hold:
                held = os.path.join(args.out_dir, f"held.{rank}")
                with open(held + ".tmp", "w") as out:  # whole once it has its name
                    out.write(f"{os.getpid()}\n")
                os.rename(held + ".tmp", held)
                while not os.path.exists(os.path.join(args.out_dir, "go")):
                    time.sleep(0.05)
            if first_attempt and rank == crash_rank and step == crash_step:
                print(f"rank {rank}: crashing at step {step}", flush=True)
                os._exit(3)
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
            step += 1
    with torch.no_grad():
        loss_after = loss_fn(model.module(x), y).item()
    params = torch.cat([p.detach().flatten().cpu() for p in model.parameters()])
    digest = hashlib.sha256(params.numpy().tobytes()).hexdigest()
    with open(os.path.join(args.out_dir, f"rank{rank}.txt"), "w") as out:
        out.write(f"{digest} {loss_before} {loss_after}\n")
    print(f"rank {rank}: loss {loss_before:.4f} -> {loss_after:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
