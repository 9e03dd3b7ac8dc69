#!/bin/bash
# What a user does first with a downloaded ddprun, run inside a Debian root that holds the
# base system and python3 only (tests/release/check-roots.sh puts it there):
#   checks.sh TARBALL WHEEL [SDK_WORKER]
# From the tarball, unpacked in /opt: the version; a standalone job of 2 workers; 2 agents
# with c10d on loopback, one worker failing once and restarted; `ddprun status` of a running
# job; its metrics page; --preload with a Python worker; a 2-rank gloo DDP job where this
# python has torch; SDK_WORKER, a C program built against the tarball's worker SDK, run by
# ddprun with the tarball's lib/ on LD_LIBRARY_PATH (check-roots.sh builds it; without it
# that check fails). From the wheel, installed with pip into a venv (one that sees the root's
# torch where it has one): the version, no torchrun, the standalone and --preload jobs, the
# c10d pair, each Python worker's sys.executable being the venv's python, and the DDP job. One line per check: "PASS <name>" or "FAIL <name>: <what>"; exits 1 if
# any failed. Each check is bounded (qemu is slow: 240 s).
set -uo pipefail
tarball=$1
wheel=$2
sdk_worker=${3:-}
work=$(mktemp -d /tmp/ddprun-checks.XXXXXX)
failed=0
export OMP_NUM_THREADS=1

pass() { echo "PASS $1"; }
fail() {
  echo "FAIL $1: $2"
  failed=1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# check NAME EXPECTED_REGEX COMMAND...: the command exits 0 within the bound and its output
# (stdout and stderr) matches every line of EXPECTED_REGEX.
check() {
  local name=$1 expected=$2
  shift 2
  local log=$work/$name.log
  # bash -c: the command may be one of the functions here (exported below).
  timeout -k 10 240 bash -c '"$@"' check "$@" >"$log" 2>&1
  local rc=$?
  if ((rc != 0)); then
    fail "$name" "exit $rc: $(tail -n 3 "$log" | tr '\n' ' ')"
    show_log "$log"
    return
  fi
  local pattern
  while IFS= read -r pattern; do
    if ! grep -Eq -- "$pattern" "$log"; then
      fail "$name" "no line matches '$pattern' in: $(tail -n 5 "$log" | tr '\n' ' ')"
      show_log "$log"
      return
    fi
  done <<<"$expected"
  pass "$name"
}

# A failed check's whole output (its last 60 lines), indented under its FAIL line: a race
# seen once in CI is understood from what each program said.
show_log() {
  tail -n 60 "$1" | sed 's/^/    | /'
}

# tagged TAG COMMAND...: runs the command with each line of its output (stdout and stderr)
# prefixed "TAG: ", so that two agents' lines in one log are told apart; returns the
# command's exit code once its last line is written.
tagged() {
  local tag=$1
  shift
  "$@" 2>&1 | sed -u "s/^/$tag: /"
  return "${PIPESTATUS[0]}"
}

cat >"$work/worker.py" <<'EOF'
import os
import sys
print(f"python worker {os.environ['RANK']} of {os.environ['WORLD_SIZE']} runs {sys.executable}",
      flush=True)
EOF

cat >"$work/ddp.py" <<'EOF'
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
dist.init_process_group("gloo")
model = DistributedDataParallel(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
total = torch.tensor([dist.get_rank()], dtype=torch.float)
dist.all_reduce(total)
print(f"ddp rank {dist.get_rank()} of {dist.get_world_size()}: sum {total.item():.0f}", flush=True)
dist.destroy_process_group()
EOF

# Two agents of one c10d job on loopback; rank 1 fails in the first attempt, while rank 0
# waits (to be stopped by the restart: a node whose workers all succeeded never runs again).
c10d_pair() {
  local ddprun=$1 port
  port=$(free_port)
  local job=(--nnodes=2 --nproc-per-node=1 --max-restarts=1 --rdzv-backend=c10d
             --rdzv-endpoint="127.0.0.1:$port" --rdzv-id=check --no-python sh -c
             'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
                if [ "$RANK" = 1 ]; then exit 3; fi
                exec sleep 600
              fi
              echo "rank $RANK done after restart $TORCHELASTIC_RESTART_COUNT"')
  tagged first "$ddprun" "${job[@]}" &
  local first=$!
  tagged second "$ddprun" "${job[@]}"
  local second=$?
  wait "$first"
  local first_rc=$?
  echo "agents exited $first_rc and $second"
  ((first_rc == 0 && second == 0))
}

# A 2-node job whose workers wait for a file; `ddprun status` (of the master one agent hosts)
# and an agent's metrics page are read while it runs, then the file ends it.
status_and_metrics() {
  local ddprun=$1 port metrics
  port=$(free_port)
  metrics=$(free_port)
  rm -f "$work/go" "$work"/started.*
  local job=(--nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint="127.0.0.1:$port"
             --rdzv-id=watched --no-python
             sh -c "touch $work/started.\$RANK; while [ ! -e $work/go ]; do sleep 0.1; done")
  tagged first "$ddprun" --metrics-port="$metrics" "${job[@]}" &
  local first=$!
  tagged second "$ddprun" "${job[@]}" &
  local second=$!
  local waited=0
  while [[ ! -e $work/started.0 || ! -e $work/started.1 ]] && ((waited < 1200)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  "$ddprun" status --rdzv-endpoint="127.0.0.1:$port"
  local status_rc=$?
  python3 - "$metrics" <<'EOF'
import sys
import urllib.request
page = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=30).read()
print("metrics page:", len(page), "bytes;", page.decode().count("ddprun_"), "ddprun_ lines")
EOF
  local metrics_rc=$?
  touch "$work/go"
  wait "$first"
  local first_rc=$?
  wait "$second"
  local second_rc=$?
  echo "status exited $status_rc, metrics $metrics_rc, agents $first_rc and $second_rc"
  ((status_rc == 0 && metrics_rc == 0 && first_rc == 0 && second_rc == 0))
}

export work
export -f free_port tagged c10d_pair status_and_metrics

mkdir -p /opt
rm -rf /opt/ddprun-*
tar -C /opt -xzf "$tarball"
bin=$(echo /opt/ddprun-*/bin)
cd "$work" || exit 1

check tarball-version '^ddprun [0-9]' "$bin/ddprun" --version
check tarball-master-version '^ddprun-master [0-9]' "$bin/ddprun-master" --version
check tarball-standalone $'^rank 0 of 2$\n^rank 1 of 2$' \
  "$bin/ddprun" --standalone --nproc-per-node=2 --no-python sh -c 'echo "rank $RANK of $WORLD_SIZE"'
check tarball-c10d-restart $'rank 0 done after restart 1\nrank 1 done after restart 1' \
  c10d_pair "$bin/ddprun"
check tarball-status-metrics $'watched\nddprun_ lines' status_and_metrics "$bin/ddprun"
check tarball-preload $'python worker 0 of 2\npython worker 1 of 2' \
  "$bin/ddprun" --standalone --nproc-per-node=2 --preload=json worker.py
if [[ -n $sdk_worker ]]; then
  check tarball-sdk-c-worker $'^c worker: rank 0 of 2 \\(local 0 of 2\\)$\n^c worker: rank 1 of 2' \
    env LD_LIBRARY_PATH="$(dirname "$bin")/lib" "$bin/ddprun" --standalone --nproc-per-node=2 \
    --no-python "$sdk_worker"
else
  fail tarball-sdk-c-worker "the SDK's C example was not built (check-roots.sh says why)"
fi
if python3 -c 'import torch' 2>/dev/null; then
  check tarball-ddp-gloo $'ddp rank 0 of 2: sum 1\nddp rank 1 of 2: sum 1' \
    "$bin/ddprun" --standalone --nproc-per-node=2 ddp.py
else
  echo "SKIP tarball-ddp-gloo: no torch for $(command -v python3)"
fi

# The venv that holds torch: where this python has torch, a venv that sees it.
has_torch=0
python3 -c 'import torch' 2>/dev/null && has_torch=1
venv_options=()
((has_torch)) && venv_options=(--system-site-packages)
python3 -m venv "${venv_options[@]}" "$work/venv" >"$work/venv.log" 2>&1 ||
  fail wheel-venv "$(tail -n 2 "$work/venv.log")"
if "$work/venv/bin/pip" install -q --no-index "$wheel" >"$work/pip.log" 2>&1; then
  pass wheel-install
else
  fail wheel-install "$(tail -n 3 "$work/pip.log" | tr '\n' ' ')"
fi
venv_python=$work/venv/bin/python3  # launcher/cli_rules.cc ChoosePython: the venv ddprun is in
check wheel-version '^ddprun [0-9]' "$work/venv/bin/ddprun" --version
check wheel-no-torchrun 'no torchrun' sh -c "test ! -e $work/venv/bin/torchrun && echo no torchrun"
check wheel-standalone $'^rank 0 of 2$\n^rank 1 of 2$' \
  "$work/venv/bin/ddprun" --standalone --nproc-per-node=2 --no-python \
  sh -c 'echo "rank $RANK of $WORLD_SIZE"'
check wheel-c10d-restart $'rank 0 done after restart 1\nrank 1 done after restart 1' \
  c10d_pair "$work/venv/bin/ddprun"
check wheel-venv-python "python worker 0 of 2 runs $venv_python\$
python worker 1 of 2 runs $venv_python\$" \
  "$work/venv/bin/ddprun" --standalone --nproc-per-node=2 worker.py
check wheel-preload "python worker 0 of 2 runs $venv_python\$
python worker 1 of 2 runs $venv_python\$" \
  "$work/venv/bin/ddprun" --standalone --nproc-per-node=2 --preload=json worker.py
if ((has_torch)); then
  check wheel-ddp-gloo $'ddp rank 0 of 2: sum 1\nddp rank 1 of 2: sum 1' \
    "$work/venv/bin/ddprun" --standalone --nproc-per-node=2 ddp.py
fi

rm -rf "$work" /opt/ddprun-*
exit $failed
