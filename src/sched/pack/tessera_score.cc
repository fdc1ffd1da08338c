#include "sched/pack/tessera_score.h"

#include <algorithm>
#include <cmath>

namespace tessera::sched::pack {

double StrandedGpuMilli(const PackContext& ctx, const NodeFree& n) {
  const double rho = ctx.cpu_per_gpu_milli();
  if (rho <= 0) return 0;
  return std::max(0.0, static_cast<double>(n.total_free()) - static_cast<double>(n.cpu_free) / rho);
}

double TesseraFrag(PackContext& ctx, const NodeFree& n) {
  return ctx.Frag(n) + kTesseraStrandWeight * StrandedGpuMilli(ctx, n);
}

double TesseraKey(PackContext& ctx, const NodeFree& n, const PodShape& s, int gpu) {
  NodeFree after = Take(n, s, gpu);
  return std::floor((TesseraFrag(ctx, after) - TesseraFrag(ctx, n)) / kTesseraQuantum);
}

int TesseraGpu(PackContext& ctx, const NodeFree& n, const PodShape& s, double* key) {
  int best = -1;
  double best_exact = 0;
  for (int g = 0; g < n.num_gpus; ++g) {
    if (n.free[g] < s.gpu_milli) continue;
    bool seen = false;
    for (int h = 0; h < g && !seen; ++h) seen = n.free[h] == n.free[g];
    if (seen) continue;
    // Inside the node the exact growth decides; equal growth: best fit.
    NodeFree after = Take(n, s, g);
    double exact = TesseraFrag(ctx, after) - TesseraFrag(ctx, n) + 1e-9 * n.free[g];
    if (best < 0 || exact < best_exact) {
      best = g;
      best_exact = exact;
    }
  }
  if (key != nullptr && best >= 0) *key = TesseraKey(ctx, n, s, best);
  return best;
}

int64_t TesseraScore::Score(CycleState&, const JobContext& ctx, const model::MemberGroup& g,
                            const NodeView& v) {
  PodShape s = ShapeOf(ctx, g);
  NodeFree n = FromState(v.state);
  double key = 0;
  if (s.gpus == 1 && s.gpu_milli < model::kMilliPerGpu) {
    if (TesseraGpu(*ctx_, n, s, &key) < 0) key = 1e18;
  } else {
    key = TesseraKey(*ctx_, n, s, -1);
  }
  keys_.push_back(key);
  return 0;
}

void TesseraScore::Normalize(const JobContext&, absl::Span<int64_t> scores) {
  if (keys_.size() != scores.size()) {
    keys_.clear();
    return;  // not called as the runner promises; leave the scores alone
  }
  double lo = *std::min_element(keys_.begin(), keys_.end());
  double hi = *std::max_element(keys_.begin(), keys_.end());
  for (size_t i = 0; i < scores.size(); ++i) {
    if (keys_[i] == lo) {
      scores[i] = kMaxNodeScore;
    } else {
      // Strictly below 100 for every key worse than the best.
      double r = (hi - keys_[i]) / (hi - lo);
      scores[i] =
          std::clamp<int64_t>(static_cast<int64_t>(r * (kMaxNodeScore - 1)), 0, kMaxNodeScore - 1);
    }
  }
  keys_.clear();
}

}  // namespace tessera::sched::pack
