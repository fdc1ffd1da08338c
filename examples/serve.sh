#!/bin/sh
# Demo inference replica for `tessera up`: prints a heartbeat line every 2 s until stopped; exits
# at once on the checkpoint signal (nothing to save).
trap 'echo "replica $TESSERA_RANK: draining"; exit 0' USR1 TERM
echo "replica $TESSERA_RANK of $TESSERA_JOB serving on GPUs $CUDA_VISIBLE_DEVICES ($NVIDIA_VISIBLE_DEVICES)"
n=0
while true; do
  sleep 2
  n=$((n + 1))
  echo "replica $TESSERA_RANK: served $((n * 37)) requests"
done
