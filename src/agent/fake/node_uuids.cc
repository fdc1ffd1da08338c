#include "agent/fake/node_uuids.h"

#include <cstdint>
#include <regex>

#include "absl/strings/str_format.h"

namespace tessera::agent {
namespace {

// FNV-1a, 64 bits: stable across runs and platforms (std::hash is neither).
uint64_t Fnv1a(std::string_view a, std::string_view b) {
  uint64_t h = 1469598103934665603ull;
  for (std::string_view s : {a, std::string_view("\0", 1), b}) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace

std::string WithNodeUuids(std::string_view config_text, std::string_view node) {
  static const std::regex kUuid(
      "(GPU|MIG)-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-)[0-9a-fA-F]{12}");
  const std::string text(config_text);
  std::string out;
  out.reserve(text.size());
  auto last = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), kUuid), end; it != end; ++it) {
    const std::smatch& m = *it;
    out.append(last, m[0].first);
    const uint64_t h = Fnv1a(node, m.str(0)) & 0xffffffffffffull;
    out += absl::StrFormat("%s-%s%012x", m.str(1), m.str(2), h);
    last = m[0].second;
  }
  out.append(last, text.cend());
  return out;
}

}  // namespace tessera::agent
