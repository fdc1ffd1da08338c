#include "sched/pack/tessera_score.h"

#include <algorithm>
#include <cmath>

namespace tessera::sched::pack {

double TesseraKey(PackContext& ctx, const NodeFree& n, const PodShape& s, int gpu) {
  NodeFree after = Take(n, s, gpu);
  double df = ctx.Frag(after) - ctx.Frag(n);
  return df + kTesseraGpuWeight * static_cast<double>(after.total_free()) +
         kTesseraCpuWeight * static_cast<double>(after.cpu_free);
}

int TesseraGpu(PackContext& ctx, const NodeFree& n, const PodShape& s, double* key) {
  int best = -1;
  double best_key = 0;
  for (int g = 0; g < n.num_gpus; ++g) {
    if (n.free[g] < s.gpu_milli) continue;
    bool seen = false;
    for (int h = 0; h < g && !seen; ++h) seen = n.free[h] == n.free[g];
    if (seen) continue;
    // Frag first; among equal frag the GPU with less free share (best fit).
    double k = TesseraKey(ctx, n, s, g) + 1e-9 * n.free[g];
    if (best < 0 || k < best_key) {
      best = g;
      best_key = k;
    }
  }
  if (key) *key = best_key;
  return best;
}

int64_t TesseraScore::Score(CycleState&, const JobContext& ctx, const model::MemberGroup& g,
                            const NodeView& v) {
  PodShape s = ShapeOf(ctx, g);
  NodeFree n = FromState(v.state);
  double key;
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
      // Strictly below 100 for every non-best key.
      double r = (hi - keys_[i]) / (hi - lo);
      scores[i] = std::clamp<int64_t>(static_cast<int64_t>(r * (kMaxNodeScore - 1)), 0,
                                      kMaxNodeScore - 1);
    }
  }
  keys_.clear();
}

}  // namespace tessera::sched::pack
