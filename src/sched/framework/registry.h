// PluginRegistry: plugin names -> factories. Built by value (no global
// registry); `DefaultRegistry()` in sched/plugins returns one with every
// built-in plugin, and callers (server, simulator, tests) may add their own.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sched/framework/plugin.h"

namespace tessera::sched {

// Free-form plugin arguments from the profile (string values).
using PluginArgs = std::map<std::string, std::string>;
using PluginFactory = std::function<absl::StatusOr<std::unique_ptr<Plugin>>(const PluginArgs&)>;

class PluginRegistry {
 public:
  // Fails if `name` is already registered.
  absl::Status Register(absl::string_view name, PluginFactory factory);
  bool Contains(absl::string_view name) const;
  absl::StatusOr<std::unique_ptr<Plugin>> Create(absl::string_view name,
                                                 const PluginArgs& args) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, PluginFactory, std::less<>> factories_;
};

}  // namespace tessera::sched
