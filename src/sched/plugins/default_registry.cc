#include "sched/plugins/default_registry.h"

#include "sched/plugins/gang.h"
#include "sched/plugins/node_selector.h"
#include "sched/plugins/nvlink_chooser.h"
#include "sched/plugins/pack_spread.h"
#include "sched/plugins/priority_sort.h"
#include "sched/plugins/resource_fit.h"
#include "sched/plugins/taint_toleration.h"
#include "sched/plugins/topology.h"

namespace tessera::sched {
namespace {
template <typename T>
PluginFactory Simple() {
  return [](const PluginArgs& args) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    if (!args.empty()) {
      return absl::InvalidArgumentError(std::string("plugin ") + std::string(T::kName) +
                                        " takes no arguments");
    }
    return std::unique_ptr<Plugin>(new T());
  };
}
}  // namespace

PluginRegistry DefaultRegistry() {
  PluginRegistry r;
  // Registration of distinct names cannot fail.
  (void)r.Register(PrioritySort::kName, Simple<PrioritySort>());
  (void)r.Register(ResourceFit::kName, Simple<ResourceFit>());
  (void)r.Register(NodeSelector::kName, Simple<NodeSelector>());
  (void)r.Register(TaintToleration::kName, Simple<TaintToleration>());
  (void)r.Register(Gang::kName, Simple<Gang>());
  (void)r.Register(Topology::kName, Simple<Topology>());
  (void)r.Register(PackSpread::kName, Simple<PackSpread>());
  (void)r.Register(NvlinkChooser::kName, Simple<NvlinkChooser>());
  return r;
}

}  // namespace tessera::sched
