#!/usr/bin/env bash
# Builds Tessera (release) and runs the main job: `tessera up`, a local cluster
# (server on the embedded store + agents with fake GPUs + a demo workload).
# Ctrl-C stops everything; extra arguments go to `tessera up` (e.g. --duration 60).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec ./build/release/src/main/tessera up "$@"
