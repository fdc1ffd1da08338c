#!/usr/bin/env bash
# Builds the libFuzzer target for API request decoding with clang
# (-fsanitize=fuzzer,address,undefined) and runs it briefly.
#   scripts/fuzz.sh [RUNS]   (default 200000 inputs, fixed seed: deterministic, as CI needs)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-200000}"
out=build/fuzz
mkdir -p "$out" "$out/corpus"
cp -n fuzz/corpus/* "$out/corpus/" 2>/dev/null || true
ABSL_LIBS=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format)
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Isrc fuzz/api_request_fuzzer.cc \
  src/api/object_codec.cc src/api/schema.cc src/api/kinds.cc src/api/store_layout.cc \
  src/api/elastic_spec.cc src/common/suggest.cc \
  $ABSL_LIBS -o "$out/api_request_fuzzer"
"$out/api_request_fuzzer" -runs="$runs" -seed=1 -max_len=4096 -rss_limit_mb=2048 \
  -print_final_stats=1 "$out/corpus" > "$out/fuzz.log" 2>&1 || { tail -n 60 "$out/fuzz.log"; exit 1; }
grep -E "^Done|stat::(number_of_executed_units|new_units_added)" "$out/fuzz.log"
