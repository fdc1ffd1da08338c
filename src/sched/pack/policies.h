// The placement policies of the FGD paper's evaluation (Weng et al., USENIX
// ATC'23, section 6, and its public simulator), as framework plugins: each
// is a Score plugin plus a GpuChooser that picks the GPU(s) inside the
// winning node. Filtering is the framework's resource-fit.
//
//   random          Every feasible node scores the same; the runner breaks
//                   the tie uniformly at random (TieBreak::kRandom with an
//                   injected seeded generator). Shared GPU: a random
//                   GPU with enough free share.
//   dotprod         Tetris' alignment: score = 100 * (1 - <free, request>/2)
//                   over (CPU, GPU milli) normalised by the simulator's
//                   MaxSpec (128 vCPU, 8 GPUs): prefers nodes whose free
//                   resources align least with the request, i.e. the
//                   tightest.
//   gpu-clustering  Gandiva-style: prefers nodes already running only pods of
//                   the same GPU shape (shared, 1, 2, 4, 8 GPUs), then mixed
//                   nodes with that shape, then empty nodes, then others; in
//                   each band the node with less free GPU wins.
//   gpu-packing     Prefers a partly used GPU, then free GPUs on a used node,
//                   then an empty node (fewest GPUs first).
//   best-fit        score = 100 * (1 - 0.5*(cpu_free - cpu)/128000
//                   - 0.5*(gpu_free - gpu)/8000), min-max normalised.
//   fgd             Fragmentation gradient descent: the node (and GPU) where
//                   the node's expected fragmentation against the workload's
//                   typical pods grows least; score = 100*sigmoid(-dF/1000).
//   tessera         Our policy; see tessera_score.h. Its profile also runs
//                   the look-ahead admission (lookahead.h), which does
//                   nothing until the runner sets a forecast.
// pack-observe (PreFilter, not a policy) teaches the context the workload's
// typical pods from the jobs it schedules (the server's profiles; see
// PackContext).
// All but random pick, for a shared-GPU pod, the partly used GPU with the
// least free share that fits (best fit); fgd and tessera their own GPU.
// Whole-GPU pods take the best-connected free GPUs (gpu_set.h): any free set
// leaves the same free shares, so this changes no packing measure.
//
// The plugins read only the node's spec and NodeState, so profiles built by
// PackProfile evaluate each equivalence class of nodes once
// (Profile::dedupe_equivalent_nodes). Not thread-safe: one PackContext per
// scheduler.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sched/framework/plugin.h"
#include "sched/framework/profile.h"
#include "sched/framework/registry.h"
#include "sched/pack/forecast.h"
#include "sched/pack/frag.h"

namespace tessera::sched::pack {

// The PreFilter plugin that teaches a PackContext the workload (PackContext::Observe).
inline constexpr char kObservePlugin[] = "pack-observe";

// Normalisation constants of the FGD simulator (MaxSpecCpu/MaxSpecGpu of its
// open-gpu-share utils, which DotProd and BestFit use). Not the largest
// openb node (104 vCPU): with 104 vCPU the CPU term weighs 1.5x more and
// both policies land 0.5-0.9 points below the published means on the
// GPU-sharing-heavy traces.
inline constexpr double kMaxSpecCpu = 128000;
inline constexpr double kMaxSpecGpu = 8000;

// State shared by the pack plugins of one scheduler.
//
// The typical pods are given (the FGD protocol takes them from the trace) or learned: a
// scheduler that runs the pack-observe PreFilter plugin (a live server, which knows no trace)
// feeds every job it sees for the first time to Observe(), and the typical list becomes FGD's
// TypicalPods of the last `kLearnWindow` members seen, recomputed after 1, 2, 4, ... members
// and then every `kRelearnEvery`, so the fragmentation measure follows the workload that
// actually arrives.
class PackContext {
 public:
  static constexpr size_t kLearnWindow = 4096;
  static constexpr int64_t kRelearnEvery = 64;

  PackContext(std::vector<TypicalPod> typical, std::mt19937_64* rng);
  const std::vector<TypicalPod>& typical() const { return typical_; }
  // Replaces the typical pods (and forgets every memoised fragmentation).
  void SetTypical(std::vector<TypicalPod> typical);
  // A job seen for the first time (`key`): its members' shapes join the learning window. A job
  // seen again (it waited and is retried) changes nothing.
  void Observe(absl::string_view key, const std::vector<PodShape>& members);
  // Members observed so far (the window is at most kLearnWindow of them).
  int64_t observed() const { return observed_; }
  std::mt19937_64* rng() const { return rng_; }
  // NodeFragmentation, memoised on the node's model, CPU and sorted shares.
  double Frag(const NodeFree& n);
  // Milli-CPU that GPU pods of the typical mix ask per milli-GPU (0 when
  // the mix has no GPU pods).
  double cpu_per_gpu_milli() const { return cpu_per_gpu_milli_; }
  // Milli-CPU that whole-GPU pods of the typical mix ask per GPU (0 when the
  // mix has none).
  double whole_cpu_per_gpu() const { return whole_cpu_per_gpu_; }
  // Share of the typical mix's one-GPU pods whose GPU share is at most
  // `milli`: how likely an arriving one-GPU pod fits a leftover of `milli`.
  double ShareFitting(int32_t milli) const;

  // What the runner knows of arriving work (forecast.h); nullopt when it
  // knows nothing, which turns the look-ahead admission off. Set between
  // scheduling cycles by whoever drives the scheduler.
  const std::optional<ArrivalForecast>& forecast() const { return forecast_; }
  void set_forecast(std::optional<ArrivalForecast> f) { forecast_ = f; }

 private:
  // CPU; model and GPU count; the sorted free shares, 10 bits each, six
  // to a word.
  struct Key {
    std::array<uint64_t, 5> w;
    // Word by word (inlined; a defaulted == on the array calls memcmp).
    friend bool operator==(const Key& a, const Key& b) {
      return a.w[0] == b.w[0] && a.w[1] == b.w[1] && a.w[2] == b.w[2] && a.w[3] == b.w[3] &&
             a.w[4] == b.w[4];
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.w[0], k.w[1], k.w[2], k.w[3], k.w[4]);
    }
  };
  std::vector<TypicalPod> typical_;
  std::mt19937_64* rng_;
  double cpu_per_gpu_milli_ = 0;
  double whole_cpu_per_gpu_ = 0;
  std::optional<ArrivalForecast> forecast_;
  absl::flat_hash_map<Key, double> memo_;
  // Learning (Observe): the last members seen and the jobs already counted.
  std::deque<PodShape> window_;
  absl::flat_hash_set<std::string> seen_jobs_;
  int64_t observed_ = 0;
  int64_t next_relearn_ = 1;
};

// The request of one member as a PodShape (model mask from the job's
// allowed models).
PodShape ShapeOf(const JobContext& ctx, const model::MemberGroup& g);

// `n` after a member of shape `s` takes GPU `gpu` (shared) or, for whole
// GPUs, the free GPUs in index order; CPU is taken too. `chosen` (optional)
// receives the GPU indices.
NodeFree Take(const NodeFree& n, const PodShape& s, int gpu,
              absl::InlinedVector<int8_t, 8>* chosen = nullptr);

// FGD's score of placing `s` on `n` using GPU `gpu` (shared; -1 otherwise).
int64_t FgdScore(PackContext& ctx, const NodeFree& n, const PodShape& s, int gpu);

// Registers every pack plugin (scores and GPU choosers) sharing `ctx`.
absl::Status RegisterPackPlugins(PluginRegistry* registry, const std::shared_ptr<PackContext>& ctx);

// Canonical policy names, in the paper's order plus "tessera".
const std::vector<std::string>& PackPolicyNames();
// Maps user spellings ("GpuPacking", "gpu-packing", "FGD") to a canonical
// name; InvalidArgument naming the choices otherwise.
absl::StatusOr<std::string> CanonicalPolicy(absl::string_view name);
// The profile of a canonical policy: resource-fit, its Score plugin, its GPU
// chooser; every node scored, equivalent nodes deduplicated; ties go to the
// lowest node id (random: uniformly at random).
absl::StatusOr<Profile> PackProfile(absl::string_view policy);

}  // namespace tessera::sched::pack
