#include "api/elastic_spec.h"

#include "absl/strings/str_cat.h"

namespace tessera::api {

std::optional<SpecError> CheckElastic(const nlohmann::json& spec, int32_t* min_replicas) {
  *min_replicas = 0;
  if (!spec.is_object()) return std::nullopt;
  auto el = spec.find("elastic");
  if (el == spec.end() || el->is_null()) return std::nullopt;
  if (!el->is_object()) return SpecError{"spec.elastic", "must be an object"};
  auto int_field = [&](const char* key, int64_t* out) -> std::optional<SpecError> {
    auto it = el->find(key);
    if (it == el->end() || !it->is_number_integer()) {
      return SpecError{absl::StrCat("spec.elastic.", key), "must be an integer"};
    }
    *out = it->get<int64_t>();
    if (*out <= 0) return SpecError{absl::StrCat("spec.elastic.", key), "must be > 0"};
    return std::nullopt;
  };
  int64_t min = 0, max = 0;
  if (auto e = int_field("minReplicas", &min)) return e;
  if (auto e = int_field("maxReplicas", &max)) return e;
  int64_t replicas = 0;
  if (auto g = spec.find("groups"); g != spec.end() && g->is_array()) {
    for (const nlohmann::json& gj : *g) {
      auto c = gj.is_object() ? gj.find("count") : gj.end();
      replicas += gj.is_object() && c != gj.end() && c->is_number_integer() ? c->get<int64_t>() : 1;
    }
  }
  if (max != replicas) {
    return SpecError{"spec.elastic.maxReplicas",
                     absl::StrCat("must equal the job's replicas, the sum of spec.groups[].count (",
                                  replicas, "): the groups' counts are the maximum, got ", max)};
  }
  if (min > max)
    return SpecError{"spec.elastic.minReplicas", "must be <= spec.elastic.maxReplicas"};
  if (auto g = spec.find("gang"); g != spec.end() && g->is_object()) {
    auto mm = g->find("minMember");
    if (mm != g->end() && mm->is_number_integer() && mm->get<int64_t>() != 0 &&
        mm->get<int64_t>() != min) {
      return SpecError{
          "spec.gang.minMember",
          absl::StrCat("conflicts with spec.elastic.minReplicas (", min, "); set one of them")};
    }
  }
  *min_replicas = static_cast<int32_t>(min);
  return std::nullopt;
}

}  // namespace tessera::api
