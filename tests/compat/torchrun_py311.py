#!/usr/bin/python3
"""torchrun from Debian's python3-torch 1.13.1, made to start on Python 3.11.

torch 1.13's Std.from_str looks values up by iterating the Std IntFlag; Python 3.11 skips
the zero member there, so every launch without -r/-t fails ('NoneType' has no attribute
'get'). PyTorch 2.0 converts with Std(int(v)) instead (pytorch/pytorch#92319); this does
the same in memory, then runs torch.distributed.run unchanged. Used only to compare ddprun
with torchrun in tests and benchmarks.
"""
import re
import runpy
import sys

from torch.distributed.elastic.multiprocessing import api

_value_re, _mapping_re = api._VALUE_REGEX, api._MAPPING_REGEX


def _std_from_str(cls, text):
    if re.match(_value_re, text):
        return cls(int(text))
    if re.match(_mapping_re, text):
        return {int(r): cls(int(v)) for r, v in (item.split(":") for item in text.split(","))}
    raise ValueError(f"{text} does not match <{_value_re}> or <{_mapping_re}>")


api.Std.from_str = classmethod(_std_from_str)

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
