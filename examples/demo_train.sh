#!/bin/sh
# A stand-in for a training script, for the README's demo: each worker prints where it sits
# in the job, runs three "steps", and rank 2 crashes at step 2 of the first attempt, so
# that ddprun's restart can be seen. Run it with: ddprun --no-python examples/demo_train.sh
echo "rank $RANK of $WORLD_SIZE (local rank $LOCAL_RANK), restart $TORCHELASTIC_RESTART_COUNT, master $MASTER_ADDR:$MASTER_PORT"
for step in 1 2 3; do
  if [ "$RANK" = 2 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$step" = 2 ]; then
    echo "step $step: simulated crash (RuntimeError: CUDA error: an illegal memory access)" >&2
    exit 1
  fi
  echo "step $step done"
  sleep 0.1
done
echo "finished"
