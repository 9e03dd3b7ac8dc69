# A startup hook as users write them (pytorch/examples' DDP tutorial seeds each rank): on
# PYTHONPATH, it seeds Python's and torch's generators from LOCAL_RANK, and says what it saw.
# It runs before the script, in every worker, with that worker's environment.
import os
import sys

_rank = os.environ.get("LOCAL_RANK")
print(f"sitecustomize: LOCAL_RANK={_rank}", file=sys.stderr, flush=True)
if _rank is not None:
    import random

    import torch

    random.seed(1000 + int(_rank))
    torch.manual_seed(1000 + int(_rank))
