#include "sched/framework/decision_trace.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::sched {
namespace {
// Splits "n00401" into ("n", 401, width 5); false without a numeric suffix.
bool Split(const std::string& s, std::string* prefix, int64_t* num, size_t* width) {
  size_t i = s.size();
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') --i;
  if (i == s.size() || s.size() - i > 18) return false;
  *prefix = s.substr(0, i);
  *width = s.size() - i;
  return absl::SimpleAtoi(s.substr(i), num);
}
}  // namespace

std::string CompressNodeNames(std::vector<std::string> names, int max_items) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<std::string> items;
  size_t i = 0;
  while (i < names.size()) {
    std::string p;
    int64_t n;
    size_t w;
    size_t j = i + 1;
    if (Split(names[i], &p, &n, &w)) {
      int64_t expect = n + 1;
      while (j < names.size()) {
        std::string p2;
        int64_t n2;
        size_t w2;
        if (!Split(names[j], &p2, &n2, &w2) || p2 != p || w2 != w || n2 != expect) break;
        ++expect;
        ++j;
      }
    }
    items.push_back(j - i > 1 ? absl::StrCat(names[i], "-", names[j - 1]) : names[i]);
    i = j;
  }
  if (static_cast<int>(items.size()) > max_items) {
    size_t more = items.size() - max_items;
    items.resize(max_items);
    items.push_back(absl::StrCat("+", more, " more"));
  }
  return absl::StrJoin(items, ", ");
}

}  // namespace tessera::sched
