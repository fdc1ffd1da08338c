#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) and runs each
# briefly from its seed corpus (fuzz/corpus/<target>):
#   api       the API's body decoding and schema validation (fuzz/api_request_fuzzer.cc)
#   http      the request edge: DeadlineStream, cpp-httplib's parser (chunked bodies,
#             pipelining), ReadBoundedBody, ParseBody (fuzz/http_request_fuzzer.cc)
#   manifest  `tessera apply`'s YAML/JSON front end and its -o yaml round trip
#             (fuzz/manifest_fuzzer.cc)
#   scripts/fuzz.sh [RUNS]   (default 200000 inputs per target, fixed seed: deterministic, as CI
#   needs)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-200000}"
out=build/fuzz
mkdir -p "$out"
CXX=(clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Isrc)
ABSL_LIBS=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format absl_time)
API_SRCS=(src/api/object_codec.cc src/api/schema.cc src/api/kinds.cc src/api/store_layout.cc
          src/api/elastic_spec.cc src/common/suggest.cc)

build() {  # NAME SOURCES... -- LIBS...
  local name=$1; shift
  "${CXX[@]}" "$@" -o "$out/${name}_fuzzer"
}
# Compiled side by side (CI's time: each takes about a minute on one core).
build api fuzz/api_request_fuzzer.cc "${API_SRCS[@]}" $ABSL_LIBS &
build http $(pkg-config --cflags cpp-httplib) fuzz/http_request_fuzzer.cc src/http/deadline_stream.cc \
  src/server/request_body.cc "${API_SRCS[@]}" $(pkg-config --libs cpp-httplib openssl) $ABSL_LIBS &
build manifest fuzz/manifest_fuzzer.cc src/cli/yaml_json.cc $(pkg-config --libs yaml-cpp) $ABSL_LIBS &
for job in $(jobs -p); do wait "$job"; done

for t in api http manifest; do
  mkdir -p "$out/corpus/$t"
  cp -n fuzz/corpus/$t/* "$out/corpus/$t/" 2>/dev/null || true
  "$out/${t}_fuzzer" -runs="$runs" -seed=1 -max_len=4096 -rss_limit_mb=2048 -timeout=20 \
    -artifact_prefix="$out/$t-" \
    -print_final_stats=1 "$out/corpus/$t" > "$out/$t.log" 2>&1 || {
    echo "fuzz target $t failed:"; tail -n 60 "$out/$t.log"; exit 1; }
  echo "$t: $(grep -E '^Done' "$out/$t.log")"
done
