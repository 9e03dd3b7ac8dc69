"""One way for a worker to end, chosen by the first argument, with a line on stdout and one
on stderr first: raises (under torch's @record, so an error file is written), sigsegv,
exit7, interrupt (an uncaught KeyboardInterrupt), unclosed (a file written and never closed,
then a clean exit; the file is <second argument>)."""
import os
import signal
import sys

import torch
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    how = sys.argv[1]
    print(f"rank {os.environ['RANK']} says {how} on stdout")
    print(f"rank {os.environ['RANK']} says {how} on stderr", file=sys.stderr)
    if how == "raises":
        raise ValueError(f"raised on purpose with {torch.ones(2).sum().item()}")
    if how == "sigsegv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if how == "exit7":
        sys.exit(7)
    if how == "interrupt":
        raise KeyboardInterrupt
    if how == "unclosed":
        kept = open(sys.argv[2], "a")
        kept.write("every byte written reaches the file\n")
        sys.modules[__name__].kept = kept  # alive until the interpreter ends


if __name__ == "__main__":
    main()
