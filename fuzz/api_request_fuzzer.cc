// libFuzzer target: the API's request decoding (body parsing with the depth,
// size and UTF-8 limits, then schema validation against every kind). Any
// input must yield a value or a clean error, never a crash or a sanitizer
// report. Built with clang by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/kinds.h"
#include "api/object_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto parsed = tessera::api::ParseBody(body);
  if (!parsed.ok()) return 0;
  for (const auto& kind : tessera::api::AllKinds()) {
    (void)tessera::api::ValidateObject(kind, *parsed, "default", "");
  }
  return 0;
}
