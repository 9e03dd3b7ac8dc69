"""A training loop with the checkpoint hook a preemptible Slurm job needs (no PyTorch needed
to try it; put your model's state where `state` is).

ddprun forwards SIGUSR1 (--signals-to-handle=SIGUSR1) and SIGTERM to every worker; each
worker then finishes its step, saves a checkpoint and exits. A requeued job starts again
from it.

  python train_with_checkpoint.py CHECKPOINT_DIR [STEPS] [STEP_SECONDS]
"""
import json
import os
import signal
import sys
import time

checkpoint_dir = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
step_seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
rank = int(os.environ["RANK"])
path = os.path.join(checkpoint_dir, f"checkpoint.rank{rank}.json")

preempted = False


def on_preemption(signum, frame):
    global preempted
    preempted = True  # finish the step in progress, then save


signal.signal(signal.SIGUSR1, on_preemption)  # --signal=B:USR1@120, through ddprun
signal.signal(signal.SIGTERM, on_preemption)  # a preemption, or scancel

state = {"step": 0}
if os.path.exists(path):
    with open(path) as f:
        state = json.load(f)
    print(f"rank {rank}: resuming at step {state['step']}", flush=True)
with open(os.path.join(checkpoint_dir, f"started.rank{rank}"), "a") as f:
    f.write(f"{state['step']}\n")

while state["step"] < steps:
    time.sleep(step_seconds)  # one training step
    state["step"] += 1
    if preempted:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, path)
        print(f"rank {rank}: preempted, checkpoint at step {state['step']}", flush=True)
        sys.exit(0)

print(f"rank {rank}: done after {state['step']} steps", flush=True)
