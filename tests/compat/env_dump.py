"""Writes this worker's environment to <out_dir>/env.<RANK>, one KEY=VALUE a line."""
import os
import sys

with open(os.path.join(sys.argv[1], "env." + os.environ["RANK"]), "w") as out:
    for key, value in sorted(os.environ.items()):
        out.write(f"{key}={value}\n")
