#!/usr/bin/env bash
# Builds Tessera (release) and runs the main job. The README's first command.
# Until the local cluster (`tessera up`) lands, the main job is the scheduling
# benchmark on a 100,000-GPU synthetic fleet.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec ./build/release/src/main/tessera bench sched --nodes 12500 --gpus-per-node 8 --nodes-per-rack 32 "$@"
