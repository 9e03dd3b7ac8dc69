#!/bin/sh
# A ddprun health check (docs/node-health.md): a short NCCL all-reduce across this node's
# GPUs with the worker SDK's ddp-allreduce (built with NCCL; installed next to ddprun). It
# fails when the all-reduce fails, hangs, finds a wrong element, or, with MIN_BUSBW_GBPS
# set, when the bus bandwidth of the largest size is below it.
#
#   ddprun --health-check=/path/to/nccl-allreduce.sh --health-check-timeout=180 ...
#
# Settings (environment): DDPRUN (the ddprun to run, default: ddprun on PATH), DDP_ALLREDUCE
# (default: ddp-allreduce), ALLREDUCE_MAX_BYTES (default 64 MiB), MIN_BUSBW_GBPS (unset: no
# bandwidth floor; nccl-tests' busbw of the same size on a healthy node, less a margin).
set -u

ddprun=${DDPRUN:-ddprun}
allreduce=${DDP_ALLREDUCE:-ddp-allreduce}
max_bytes=${ALLREDUCE_MAX_BYTES:-67108864}

# The check runs in the node's environment, which may hold the job's own PET_* and torchrun
# variables: the inner one-node job must not read them (it would try to join the real job).
for variable in $(env | sed -n 's/^\(PET_[A-Za-z0-9_]*\)=.*/\1/p;s/^\(TORCHELASTIC_[A-Za-z0-9_]*\)=.*/\1/p'); do
  unset "$variable"
done

if ! out=$(timeout 150 "$ddprun" --standalone --nnodes=1 --nproc-per-node=gpu \
    --health-check=none --max-restarts=0 --no-python \
    "$allreduce" --iters 5 --warmup 2 --max-bytes "$max_bytes" 2>&1); then
  echo "the NCCL all-reduce across $(hostname)'s GPUs failed:" >&2
  printf '%s\n' "$out" | tail -n 15 >&2
  exit 1
fi
# ddp-allreduce prints nccl-tests' layout: the last row is the largest size, column 8 the
# out-of-place bus bandwidth (GB/s), column 9 its wrong elements.
last=$(printf '%s\n' "$out" | grep -v '^#' | awk 'NF >= 9 && $1 ~ /^[0-9]+$/' | tail -n 1)
if [ -z "$last" ]; then
  echo "ddp-allreduce printed no result row on $(hostname):" >&2
  printf '%s\n' "$out" | tail -n 15 >&2
  exit 1
fi
busbw=$(echo "$last" | awk '{print $8}')
wrong=$(echo "$last" | awk '{print $9}')
if [ "$wrong" != "0" ]; then
  echo "NCCL all-reduce on $(hostname): $wrong wrong elements at $(echo "$last" | awk '{print $1}') bytes" >&2
  exit 1
fi
if [ -n "${MIN_BUSBW_GBPS:-}" ] &&
   awk -v got="$busbw" -v want="$MIN_BUSBW_GBPS" 'BEGIN { exit !(got < want) }'; then
  echo "NCCL all-reduce on $(hostname): bus bandwidth $busbw GB/s at $max_bytes bytes, below MIN_BUSBW_GBPS=$MIN_BUSBW_GBPS (NVLink or a GPU degraded?)" >&2
  exit 1
fi
exit 0
