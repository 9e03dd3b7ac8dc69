"""Draws from Python's and torch's generators without seeding them: whatever a startup hook
(startup_hook/sitecustomize.py) seeded is what it gets. Writes <out_dir>/drawn.<RANK>."""
import os
import random
import sys

import torch

with open(os.path.join(sys.argv[1], "drawn." + os.environ["RANK"]), "w") as out:
    out.write(f"random={random.random()!r}\ntorch={torch.rand(4).tolist()!r}\n")
