#!/bin/sh
# Demo small job for `tessera up`: works for SECONDS (first argument, default 5) and exits 0.
secs=${1:-5}
echo "$TESSERA_JOB on GPUs $CUDA_VISIBLE_DEVICES: working for ${secs}s"
sleep "$secs"
echo "$TESSERA_JOB: done"
