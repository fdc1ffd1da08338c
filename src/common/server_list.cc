#include "common/server_list.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace tessera {

std::vector<std::string> SplitServerList(absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (!part.empty()) out.emplace_back(part);
  }
  return out;
}

}  // namespace tessera
