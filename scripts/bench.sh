#!/usr/bin/env bash
# Runs every benchmark (bench/run_all.py) on a Release build: tables on the terminal, JSON
# and PNG plots in bench-results/ (or the folder given). About 45 minutes on 2 cores: 12 of
# them 3 runs of every cell of bench/scale.py, 12 TLS at scale (bench/tls_scale.py; 7 of
# those waiting for 10,000 TLS connections that do not come up here), 5 torch's TCPStore
# serving 16,384 clients (bench/store_scale.py).
#   scripts/bench.sh [RESULTS_DIR] [--no-torchrun] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-results
if [[ $# -gt 0 && "$1" != --* ]]; then out=$1; shift; fi
scripts/install-deps.sh --bench
build_dir=$(scripts/build.sh | tail -n 1)
# One connection per simulated agent needs a descriptor per agent on each side.
ulimit -n "$(ulimit -Hn)"
exec python3 bench/run_all.py --build "$build_dir" --out "$out" "$@"
