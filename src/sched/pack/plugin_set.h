// Every plugin a Tessera scheduler can run, in one registry: the built-in ones
// (sched::DefaultRegistry) and the packing policies of this folder (tessera,
// fgd, best-fit, ...), all sharing one PackContext.
//
// The server (`tessera server --profile FILE`), `tessera sim pack --profile FILE`
// and `tessera sim replay --profile FILE` build their registry here, so a
// profile measured in a simulator is one the server runs, with the same code.
//
// Typical pods: given (the FGD protocol takes them from the trace) or, when the
// profile runs the pack-observe PreFilter plugin, learned from the jobs the
// scheduler sees (PackContext::Observe) -- a live server knows no trace.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "sched/framework/registry.h"
#include "sched/pack/frag.h"
#include "sched/pack/policies.h"

namespace tessera::sched::pack {

// Owns the pack plugins' shared context and the random generator they draw
// from. Not thread-safe: one per scheduler, used from its scheduling thread.
// Not movable: the context holds a pointer to `rng_`.
class PluginSet {
 public:
  static constexpr uint64_t kDefaultSeed = 0x7e55e7a;
  explicit PluginSet(uint64_t seed = kDefaultSeed, std::vector<TypicalPod> typical = {});
  PluginSet(const PluginSet&) = delete;
  PluginSet& operator=(const PluginSet&) = delete;

  // DefaultRegistry plus every pack plugin sharing context().
  PluginRegistry Registry() const;
  // Adds the pack plugins to `r` (QueueManagerConfig::extra_plugins). Fails
  // only if `r` already holds one of their names.
  absl::Status Register(PluginRegistry* r) const;

  PackContext& context() const { return *pack_; }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  std::shared_ptr<PackContext> pack_;
};

// True if `p` names `plugin` as a queue sort, GPU chooser or plugin.
bool ProfileUses(const Profile& p, absl::string_view plugin);

}  // namespace tessera::sched::pack
