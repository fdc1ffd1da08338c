#!/bin/sh
# Demo training member for `tessera up` and the end-to-end tests: a stand-in for one rank of a
# distributed training job. It records the environment it was started with, resumes from its
# checkpoint file when one exists, "trains" (one step per 0.1 s), writes a checkpoint every 10
# steps and, on the checkpoint signal (SIGUSR1, sent before preemption), writes one more and exits.
#
# Env: TESSERA_CHECKPOINT_PATH (directory; default ./checkpoints), TESSERA_RANK,
#      TESSERA_GENERATION, CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, TRAIN_STEPS (default: run
#      until stopped).
dir=${TESSERA_CHECKPOINT_PATH:-./checkpoints}
rank=${TESSERA_RANK:-0}
gen=${TESSERA_GENERATION:-0}
mkdir -p "$dir"
env | grep -E '^(CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|TESSERA_)' | sort \
  > "$dir/env-rank$rank-gen$gen.txt"
step=0
if [ -f "$dir/rank$rank.step" ]; then
  step=$(cat "$dir/rank$rank.step")
  echo "rank $rank generation $gen: resuming from checkpoint at step $step"
else
  echo "rank $rank generation $gen: starting from scratch"
fi
echo "rank $rank: GPUs CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"
save() {
  echo "$step" > "$dir/rank$rank.step.tmp" && mv "$dir/rank$rank.step.tmp" "$dir/rank$rank.step"
}
trap 'save; echo "rank $rank: checkpoint signal at step $step, checkpoint written"; exit 0' USR1
steps=${TRAIN_STEPS:-0}
while [ "$steps" -eq 0 ] || [ "$step" -lt "$steps" ]; do
  sleep 0.1
  step=$((step + 1))
  if [ $((step % 10)) -eq 0 ]; then
    save
    echo "rank $rank: step $step, checkpoint written"
  fi
done
save
echo "rank $rank: finished at step $step"
