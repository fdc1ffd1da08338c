#!/bin/sh
# Demo inference replica for `tessera up`: prints a heartbeat line every 2 s until stopped; exits
# at once on the checkpoint signal (nothing to save). It writes its latency to
# $TESSERA_METRICS_PATH as a real server would (docs/agent.md, "Replica metrics"): a p99 of 400 ms
# while it warms up (its first 20 s), 150 ms after, so the demo service scales up on its SLO.
trap 'echo "replica $TESSERA_RANK: draining"; exit 0' USR1 TERM
echo "replica $TESSERA_RANK of $TESSERA_JOB serving on GPUs $CUDA_VISIBLE_DEVICES ($NVIDIA_VISIBLE_DEVICES)"
n=0
while true; do
  p99=150
  [ "$n" -lt 10 ] && p99=400
  if [ -n "$TESSERA_METRICS_PATH" ]; then
    printf '{"p99LatencyMs": %s, "rps": 37}\n' "$p99" > "$TESSERA_METRICS_PATH.tmp" &&
      mv "$TESSERA_METRICS_PATH.tmp" "$TESSERA_METRICS_PATH"
  fi
  sleep 2
  n=$((n + 1))
  echo "replica $TESSERA_RANK: served $((n * 37)) requests (p99 $p99 ms)"
done
