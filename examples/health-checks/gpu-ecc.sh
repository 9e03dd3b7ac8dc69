#!/bin/sh
# A ddprun health check (docs/node-health.md): fail when a GPU of this node has had
# uncorrectable ECC errors since the driver loaded, or has retired pages waiting for a reset.
#
#   ddprun --health-check=/path/to/gpu-ecc.sh ...     (with the built-in check: builtin,/path/...)
#
# Exit 0: healthy. Anything else keeps the node out for --node-cooldown; the last lines
# printed here reach the master and every node's summary, so say what is wrong and where.
set -u

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "nvidia-smi is not installed on $(hostname): no NVIDIA driver?" >&2
  exit 1
fi
if ! report=$(timeout 30 nvidia-smi -q -d ECC,PAGE_RETIREMENT 2>&1); then
  echo "nvidia-smi failed on $(hostname):" >&2
  echo "$report" | tail -n 5 >&2
  exit 1
fi
# The plain text of -q, in both layouts drivers print: "DRAM Uncorrectable : N" (R470 and
# later) and "Double Bit / Total : N" (older). Only the Volatile counts (since the driver
# loaded) matter for this job; Aggregate counts are the GPU's whole life.
bad=$(printf '%s\n' "$report" | awk -F' *: *' '
  /^GPU [0-9A-Fa-f]/ { gpu = $0; section = "" }
  /^ *Volatile *$/ { section = "volatile" }
  /^ *Aggregate *$/ { section = "aggregate" }
  /^ *Retired Pages *$/ { section = "retired" }
  /^ *Double Bit *$/ { double = 1 } /^ *Single Bit *$/ { double = 0 }
  section == "volatile" && $2 ~ /^[0-9]+$/ && $2 > 0 &&
    ($1 ~ /Uncorrectable/ || (double && $1 ~ /Total/)) {
    sub(/^ */, "", $1); print gpu ": " $2 " uncorrectable ECC errors (" $1 ", since the driver loaded)"
  }
  section == "retired" && $1 ~ /Pending/ && $2 ~ /Yes/ { print gpu ": retired pages wait for a GPU reset" }
')
if [ -n "$bad" ]; then
  echo "$bad" >&2
  echo "drain $(hostname) and reset or replace the GPU (nvidia-smi -r, or the vendor's RMA)" >&2
  exit 1
fi
exit 0
