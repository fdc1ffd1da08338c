#!/usr/bin/env bash
# Builds the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer and runs them.
# The preset compiles with -g1: line tables only, so reports keep file:line while compiling and
# linking take much less than with full debug info.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset asan-ubsan >/dev/null
cmake --build --preset asan-ubsan
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --preset asan-ubsan -j"$(nproc)" -LE slow "$@"
