#!/usr/bin/env bash
# Builds Tessera (release) and runs every test. The README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release -j"$(nproc)" "$@"
