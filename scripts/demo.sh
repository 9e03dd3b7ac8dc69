#!/usr/bin/env bash
# Installs the build dependencies, builds ddprun and runs the demo job: the embedded master,
# 4 workers, one of which crashes once and is restarted.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --build
build_dir=$(scripts/build.sh | tail -n 1)

cat <<'INTRO'

=== ddprun demo ===========================================================
  ddprun --standalone --nproc-per-node=4 --max-restarts=3 --tee=3 \
         --no-python examples/demo_train.sh
4 workers start (the rendezvous is embedded in the agent); rank 2 crashes at step 2 of the first attempt; ddprun sees it at once,
stops the other 3 (SIGTERM), and restarts all 4 with TORCHELASTIC_RESTART_COUNT=1 and a
fresh MASTER_PORT. Lines from workers carry a [default<local_rank>]: prefix; ddprun's own
lines start with [ddprun].
===========================================================================
INTRO
set +e
LOGLEVEL=INFO "$build_dir/launcher/ddprun" --standalone --nproc-per-node=4 --max-restarts=3 \
  --tee=3 --no-python examples/demo_train.sh
status=$?
set -e
echo
echo "=== ddprun exited with status $status (0: every worker of the final attempt succeeded)"
exit "$status"
