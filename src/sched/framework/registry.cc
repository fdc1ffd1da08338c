#include "sched/framework/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::sched {

absl::Status PluginRegistry::Register(absl::string_view name, PluginFactory factory) {
  auto [it, inserted] = factories_.emplace(std::string(name), std::move(factory));
  if (!inserted)
    return absl::AlreadyExistsError(absl::StrCat("plugin ", name, " registered twice"));
  return absl::OkStatus();
}

bool PluginRegistry::Contains(absl::string_view name) const {
  return factories_.find(name) != factories_.end();
}

absl::StatusOr<std::unique_ptr<Plugin>> PluginRegistry::Create(absl::string_view name,
                                                               const PluginArgs& args) const {
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown plugin \"", name, "\"; known: ", absl::StrJoin(Names(), ", ")));
  }
  return it->second(args);
}

std::vector<std::string> PluginRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& [n, f] : factories_) out.push_back(n);
  return out;
}

}  // namespace tessera::sched
