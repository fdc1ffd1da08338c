// tessera: our placement policy for GPU-sharing fleets.
//
// Algorithm. For a member of shape s and each feasible node n (one per
// equivalence class), consider every distinct way to place s on n (for a
// shared-GPU pod: each distinct free share that fits; for whole GPUs: free
// GPUs) and compute, in exact floating point, the growth of the node's
// expected fragmentation against the workload's typical pods (frag.h):
//   dF(n, s) = F(n after s) - F(n).
// The node and GPU with the smallest
//   key = dF + w_gpu * gpu_free_after(n) + w_cpu * cpu_free_after(n)
// win (w small, so they only break near-ties toward the fuller node: best
// fit). Scores are rescaled in Normalize so the best key maps to 100.
//
// Why it beats FGD. FGD scores 100*sigmoid(-dF/1000) truncated to an
// integer: every dF within about +-20 milli-GPU of another collapses into one
// score, and Kubernetes then picks among the ties at random. Those ties are
// frequent (most small placements change F by a few milli) and random picks
// among them spread small pods over many GPUs and nodes, which is exactly the
// fragmentation FGD tries to avoid. Ranking by the exact gradient, and by
// best fit among true ties, keeps the greedy descent on F while packing the
// residue, so fewer GPUs end as unusable slivers or stranded by CPU.
//
// Not thread-safe (one instance per scheduler, like every plugin).
#pragma once

#include <memory>
#include <vector>

#include "sched/framework/plugin.h"
#include "sched/pack/frag.h"
#include "sched/pack/policies.h"

namespace tessera::sched::pack {

// Tie-break weights (per milli-GPU and per milli-CPU left after placement).
inline constexpr double kTesseraGpuWeight = 1e-3;
inline constexpr double kTesseraCpuWeight = 1e-6;

// The key above (lower is better) for placing `s` on `n` with GPU `gpu`
// (shared pods; -1 for whole GPUs and CPU-only pods).
double TesseraKey(PackContext& ctx, const NodeFree& n, const PodShape& s, int gpu);
// The GPU tessera gives a shared pod on `n` (-1 if none fits); `key` gets
// its key.
int TesseraGpu(PackContext& ctx, const NodeFree& n, const PodShape& s, double* key = nullptr);

class TesseraScore : public Plugin, public ScorePlugin {
 public:
  TesseraScore(std::string name, std::shared_ptr<PackContext> ctx)
      : name_(std::move(name)), ctx_(std::move(ctx)) {}
  absl::string_view Name() const override { return name_; }
  // Records the node's key (in call order) and returns a provisional score;
  // Normalize, which the runner calls after scoring every feasible node,
  // turns the recorded keys into the final 0..100 scores.
  int64_t Score(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                const NodeView& n) override;
  void Normalize(const JobContext& ctx, absl::Span<int64_t> scores) override;

 private:
  std::string name_;
  std::shared_ptr<PackContext> ctx_;
  std::vector<double> keys_;
};

}  // namespace tessera::sched::pack
