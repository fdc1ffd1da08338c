#include "sched/pack/plugin_set.h"

#include <algorithm>

#include "sched/plugins/default_registry.h"

namespace tessera::sched::pack {

PluginSet::PluginSet(uint64_t seed, std::vector<TypicalPod> typical)
    : rng_(seed), pack_(std::make_shared<PackContext>(std::move(typical), &rng_)) {}

absl::Status PluginSet::Register(PluginRegistry* r) const { return RegisterPackPlugins(r, pack_); }

PluginRegistry PluginSet::Registry() const {
  PluginRegistry r = DefaultRegistry();
  (void)Register(&r);  // the built-ins use none of the pack names: cannot clash
  return r;
}

bool ProfileUses(const Profile& p, absl::string_view plugin) {
  return p.queue_sort == plugin || p.gpu_chooser == plugin ||
         std::any_of(p.plugins.begin(), p.plugins.end(),
                     [&](const auto& c) { return c.name == plugin; });
}

}  // namespace tessera::sched::pack
